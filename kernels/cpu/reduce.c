/* reduce.c — CPU reductions: sum, mean, prod, amax, amin, argmax, argmin, var.
 *
 * Invariants:
 *  - od_reduce_parse (kernels/shape_reduce.c) validates every argument; this
 *    file only computes. The output comes from od_alloc_outputs, so it is
 *    contiguous and its linear index enumerates the kept dims in order.
 *  - Floating data accumulates in double (exact for every float16, bfloat16
 *    and float32 value, so half types are "computed in float" or better);
 *    float64 sums are pairwise. Integer and bool data accumulates in uint64
 *    (modular, like torch's int64 wraparound, and free of signed-overflow UB).
 *  - var is two-pass (mean, then the sum of squared deviations): more accurate
 *    than a one-pass formula and still vectorisable. The mean is taken as
 *    K + sum(x - K) / N with K the first element, so constant data gives a
 *    variance of exactly 0 (like torch's Welford), not rounding noise. The
 *    divisor is max(0, N - correction), so N <= correction gives inf or nan
 *    like torch.
 *  - Partial sums (runs, buffers, parallel chunks, column updates) combine
 *    with Neumaier compensation, so the error does not grow with their count.
 *  - amax/amin propagate NaN; argmax/argmin return the first NaN, else the
 *    first maximum/minimum (ties break toward the smaller index).
 *  - prod multiplies in double (floating) or uint64 (integers, modular like
 *    torch's int64 wraparound); like sum it reads self cast to its dtype.
 *  - sum/mean with a dtype argument read self cast to that dtype. When that
 *    cast is exact for every value the loads do it on the fly; otherwise
 *    (rounding, overflow to inf, wraparound) self is converted first, as torch
 *    does, so the result matches torch's cast-then-reduce.
 *  - Two layouts cover every stride pattern without copying: "row" reduces a
 *    run of the reduced dims into one output (parallel over outputs, or over
 *    chunks of the run when there are few outputs); "column" walks the reduced
 *    dims and updates a block of outputs that are adjacent in memory
 *    (sum(dim=0) of a row-major matrix), so every load is contiguous.
 */
/* As in elementwise.c: let gcc vectorise loops that need a run-time cost check. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")
#endif
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_parallel.h"
#include "od_shape.h"

#define RBUF 256          /* elements gathered into a buffer at a time */
#define COLB 256          /* outputs updated together in column mode */
#define SPLIT_CHUNK 32768 /* reduced elements per task when outputs are few */
#define GRAIN_WORK 32768  /* elements of work per parallel task, at least */

typedef struct red_plan {
    od_reduce_kind kind;
    bool acc_float;      /* accumulate in double; else in uint64/int64 */
    od_dtype w;          /* dtype of the data read */
    size_t esz;
    const char *base;    /* element [0, ..., 0] of the data read */
    int nk, nr;          /* kept / reduced dims after dropping size 1 and coalescing */
    int64_t ksize[OD_MAX_DIMS], kstride[OD_MAX_DIMS];
    int64_t rsize[OD_MAX_DIMS], rstride[OD_MAX_DIMS];
    int64_t M, N;        /* outputs, reduced elements per output */
    int64_t correction;
    od_dtype out_dtype;
    char *out;
} red_plan;

/* A partial result over part of one output's reduced elements. */
typedef struct part {
    double s, c; /* float sum, compensated (Neumaier): the value is s + c;
                  * var: sum(x - K) in pass 0, squared deviations in pass 1 */
    uint64_t u;  /* integer sum (modular) */
    double m;    /* float max/min, argmax/argmin's best value */
    int64_t im;  /* integer max/min, argmax/argmin's best value */
    int64_t idx; /* argmax/argmin: index of the best value, -1 before any */
} part;

/* Compensated addition: partial sums of runs and buffers (which may be many
 * and short) add up with O(1) rounding error instead of O(count). */
static inline void kadd(double *s, double *c, double v)
{
    double t = *s + v;
    *c += fabs(*s) >= fabs(v) ? (*s - t) + v : (v - t) + *s;
    *s = t;
}

/* s + c; once s is inf or NaN the compensation is meaningless (inf - inf). */
static inline double ksum(double s, double c) { return isfinite(s) ? s + c : s; }

static void part_init(const red_plan *P, part *a)
{
    a->s = P->kind == OD_RED_PROD ? 1.0 : 0.0; /* prod: s is the running product */
    a->c = 0.0;
    a->u = P->kind == OD_RED_PROD;
    a->m = P->kind == OD_RED_AMIN ? INFINITY : -INFINITY;
    a->im = P->kind == OD_RED_AMIN ? INT64_MAX : INT64_MIN;
    a->idx = -1;
}

/* ---- loads ---------------------------------------------------------------------- */

/* n elements of dtype dt at p (stride in elements) as doubles / as int64,
 * through the element traits of iter.h. */
static void gather_f64(const char *p, od_dtype dt, int64_t stride, int64_t n, double *dst)
{
    switch (dt) {
#define G_(X)                                                                    \
    case OD_##X: {                                                               \
        const OD_CPU_T_##X *x = (const OD_CPU_T_##X *)(const void *)p;           \
        for (int64_t i = 0; i < n; i++)                                          \
            dst[i] = (double)OD_CPU_LD_##X(x[i * stride]);                       \
        break;                                                                   \
    }
        OD_CPU_ALL_DTYPES(G_)
#undef G_
    default:
        break;
    }
}

/* Only integer and bool dtypes reach this (floats accumulate in double). */
static void gather_i64(const char *p, od_dtype dt, int64_t stride, int64_t n, int64_t *dst)
{
    switch (dt) {
#define G_(X)                                                                    \
    case OD_##X: {                                                               \
        const OD_CPU_T_##X *x = (const OD_CPU_T_##X *)(const void *)p;           \
        for (int64_t i = 0; i < n; i++)                                          \
            dst[i] = (int64_t)OD_CPU_LD_##X(x[i * stride]);                      \
        break;                                                                   \
    }
        G_(BOOL) G_(UINT8) G_(INT8) G_(INT16) G_(INT32) G_(INT64)
#undef G_
    default:
        for (int64_t i = 0; i < n; i++)
            dst[i] = 0;
        break;
    }
}

static void store_f64(char *out, od_dtype dt, int64_t i, double v)
{
    switch (dt) {
#define S_(X)                                                                    \
    case OD_##X:                                                                 \
        ((OD_CPU_T_##X *)(void *)out)[i] = OD_CPU_FROM_F64_##X(v);               \
        break;
        OD_CPU_ALL_DTYPES(S_)
#undef S_
    default:
        break;
    }
}

/* Integer results truncate to the output's width (modular, like torch). */
static void store_i64(char *out, od_dtype dt, int64_t i, int64_t v)
{
    switch (dt) {
#define S_(X)                                                                    \
    case OD_##X:                                                                 \
        ((OD_CPU_T_##X *)(void *)out)[i] = OD_CPU_FROM_I64_##X(v);               \
        break;
        OD_CPU_ALL_DTYPES(S_)
#undef S_
    default:
        break;
    }
}

/* ---- contiguous kernels ------------------------------------------------------------
 * Four independent accumulators of eight double lanes (GCC vector types, one
 * zmm each under the AVX-512 clone, two ymm under AVX2): a single one was a
 * chain of dependent adds, one add's latency per eight elements. Lane j of
 * accumulator k sums elements 32 i + 8 k + j; then the four add up as
 * (a0 + a1) + (a2 + a3), the remaining blocks of eight go into that, its
 * lanes add up as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), and the
 * last n % 8 elements follow in order. Vector arithmetic is lane-wise IEEE,
 * so every clone gives the same bits, and rows_sum_f32_512 below replays this
 * order for float32 sums. TERM maps a double (vector or scalar; p: the shift
 * or mean) to what is added. */
typedef double v8d_ __attribute__((vector_size(64)));
typedef float v8f_u_ __attribute__((vector_size(32), aligned(4), may_alias));
typedef double v8d_u_ __attribute__((vector_size(64), aligned(8), may_alias));
#define LD_float_(q) __builtin_convertvector(*(const v8f_u_ *)(const void *)(q), v8d_)
#define LD_double_(q) (*(const v8d_u_ *)(const void *)(q))
#define LANE_SUM_(name, T, TERM)                                                       \
    OD_CPU_CLONES static double name(const T *restrict x, int64_t n, double p)        \
    {                                                                                  \
        (void)p;                                                                       \
        v8d_ a0 = {0}, a1 = a0, a2 = a0, a3 = a0;                                      \
        int64_t i = 0;                                                                 \
        for (; i + 32 <= n; i += 32) {                                                 \
            a0 += TERM(LD_##T##_(x + i)), a1 += TERM(LD_##T##_(x + i + 8));            \
            a2 += TERM(LD_##T##_(x + i + 16)), a3 += TERM(LD_##T##_(x + i + 24));      \
        }                                                                              \
        v8d_ a = (a0 + a1) + (a2 + a3);                                                \
        for (; i + 8 <= n; i += 8)                                                     \
            a += TERM(LD_##T##_(x + i));                                               \
        double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));  \
        for (; i < n; i++)                                                             \
            s += TERM((double)x[i]);                                                   \
        return s;                                                                      \
    }
#define T_PLAIN_(v) (v)
#define T_DEV_(v) ((v) - p)
#define T_SQDEV_(v) (((v) - p) * ((v) - p))
LANE_SUM_(lanes_sum_f32, float, T_PLAIN_)
LANE_SUM_(lanes_sum_f64, double, T_PLAIN_)
LANE_SUM_(lanes_dev_f32, float, T_DEV_)
LANE_SUM_(lanes_dev_f64, double, T_DEV_)
LANE_SUM_(lanes_sqdev_f32, float, T_SQDEV_)
LANE_SUM_(lanes_sqdev_f64, double, T_SQDEV_)
#undef LANE_SUM_

/* The same order in AVX-512 intrinsics for float32 data: gcc lowers the
 * vector types' float -> double conversion as two halves (extract, convert,
 * insert: five instructions per eight elements where vcvtps2pd takes one),
 * which made the loop issue-bound. The loop asks for the data SUM_AHEAD
 * floats on: with twice the instructions per byte of a float sum, it left
 * fewer loads in flight than the host's fast memory state needs (2 threads
 * over 64 MB, AMD EPYC: 720-760 -> 555-575 us, a float-accumulator loop
 * 500; the same in the slow state). OD_CPU_PREFETCH may reach past the end. */
#define SUM_AHEAD 4096
#define LANE_SUM_512_(name, TERM, TERM1)                                               \
    __attribute__((target("avx512f"))) static double name##_512(const float *x, int64_t n, double p) \
    {                                                                                  \
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, pv = _mm512_set1_pd(p); \
        (void)pv;                                                                      \
        int64_t i = 0;                                                                 \
        for (; i + 32 <= n; i += 32) {                                                 \
            OD_CPU_PREFETCH(x + i, SUM_AHEAD, 0);                                      \
            OD_CPU_PREFETCH(x + i, SUM_AHEAD + 16, 0);                                 \
            a0 = _mm512_add_pd(a0, TERM(_mm512_cvtps_pd(_mm256_loadu_ps(x + i))));     \
            a1 = _mm512_add_pd(a1, TERM(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)))); \
            a2 = _mm512_add_pd(a2, TERM(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 16))));\
            a3 = _mm512_add_pd(a3, TERM(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 24))));\
        }                                                                              \
        __m512d a = _mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3));       \
        for (; i + 8 <= n; i += 8)                                                     \
            a = _mm512_add_pd(a, TERM(_mm512_cvtps_pd(_mm256_loadu_ps(x + i))));       \
        double l[8];                                                                   \
        _mm512_storeu_pd(l, a);                                                        \
        double s = od_cpu_sum8(l);                                                     \
        for (; i < n; i++)                                                             \
            s += TERM1((double)x[i]);                                                  \
        return s;                                                                      \
    }
#define T512_PLAIN_(v) (v)
#define T512_DEV_(v) _mm512_sub_pd((v), pv)
#define T512_SQDEV_(v) _mm512_mul_pd(_mm512_sub_pd((v), pv), _mm512_sub_pd((v), pv))
LANE_SUM_512_(lanes_sum_f32, T512_PLAIN_, T_PLAIN_)
LANE_SUM_512_(lanes_dev_f32, T512_DEV_, T_DEV_)
LANE_SUM_512_(lanes_sqdev_f32, T512_SQDEV_, T_SQDEV_)
#undef LANE_SUM_512_

static bool have_avx512(void)
{
    __builtin_cpu_init(); /* returns at once after the first call; no shared state of ours */
    return __builtin_cpu_supports("avx512f");
}

/* float64 sums are pairwise above 1024 elements, so their error grows with
 * log n, not n; float32 data summed in double needs no such care. */
static double pairwise_f64(double (*leaf)(const double *restrict, int64_t, double), const double *x,
                           int64_t n, double p)
{
    if (n <= 1024)
        return leaf(x, n, p);
    int64_t h = (n / 2 + 7) & ~(int64_t)7;
    return pairwise_f64(leaf, x, h, p) + pairwise_f64(leaf, x + h, n - h, p);
}

double od_cpu_sum_f32(const float *x, int64_t n)
{
    return have_avx512() ? lanes_sum_f32_512(x, n, 0.0) : lanes_sum_f32(x, n, 0.0);
}
double od_cpu_sum_f64(const double *x, int64_t n) { return pairwise_f64(lanes_sum_f64, x, n, 0.0); }
double od_cpu_sqdev_f32(const float *x, int64_t n, double mean)
{
    return have_avx512() ? lanes_sqdev_f32_512(x, n, mean) : lanes_sqdev_f32(x, n, mean);
}
double od_cpu_sqdev_f64(const double *x, int64_t n, double mean)
{
    return pairwise_f64(lanes_sqdev_f64, x, n, mean);
}
/* sum(x - shift): var's first pass. */
static double sumdev_f32(const float *x, int64_t n, double shift)
{
    return have_avx512() ? lanes_dev_f32_512(x, n, shift) : lanes_dev_f32(x, n, shift);
}
static double sumdev_f64(const double *x, int64_t n, double shift)
{
    return pairwise_f64(lanes_dev_f64, x, n, shift);
}

/* NaN-propagating max / min: once a lane holds NaN, no comparison replaces it. */
#define MAXNAN_(acc, v) ((v) > (acc) || (v) != (v) ? (v) : (acc))
#define MINNAN_(acc, v) ((v) < (acc) || (v) != (v) ? (v) : (acc))

/* AVX-512 max / min of x[0, n): four accumulators of 16 lanes (one was a
 * chain of dependent selects, one select's latency per 8 elements). The
 * instructions are not NaN-propagating, so NaN is only detected (an
 * unordered compare of two loads flags a NaN in either) and the caller redoes
 * such a run in the NaN-propagating scalar loop. max_ps(v, acc) keeps acc on
 * ties (MAXNAN_'s rule); between -0 and +0 the result depends on the order,
 * as torch's does (its amax of [-0., 0.] is -0., of [0., -0.] +0.). The last
 * n % 16 elements come in through a masked load whose other lanes are the
 * accumulator itself. Returns false when x holds a NaN. */
#define MM512_(name, OP, RED)                                                                       \
    __attribute__((target("avx512f"))) static bool name(const float *x, int64_t n, float *res)   \
    {                                                                                            \
        __m512 a0 = _mm512_set1_ps(*res), a1 = a0, a2 = a0, a3 = a0;                             \
        __mmask16 nan = 0;                                                                       \
        int64_t i = 0;                                                                           \
        for (; i + 64 <= n; i += 64) {                                                           \
            __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);                \
            __m512 v2 = _mm512_loadu_ps(x + i + 32), v3 = _mm512_loadu_ps(x + i + 48);           \
            a0 = OP(v0, a0), a1 = OP(v1, a1), a2 = OP(v2, a2), a3 = OP(v3, a3);                  \
            nan |= _mm512_cmp_ps_mask(v0, v1, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v2, v3, _CMP_UNORD_Q); \
        }                                                                                        \
        a0 = OP(OP(a1, a0), OP(a3, a2));                                                         \
        for (; i + 16 <= n; i += 16) {                                                           \
            __m512 v = _mm512_loadu_ps(x + i);                                                   \
            a0 = OP(v, a0);                                                                      \
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);                                       \
        }                                                                                        \
        if (i < n) {                                                                             \
            __m512 v = _mm512_mask_loadu_ps(a0, (__mmask16)((1u << (n - i)) - 1), x + i);        \
            a0 = OP(v, a0);                                                                      \
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);                                       \
        }                                                                                        \
        /* a shuffle tree (no NaN to order): 16 serial selects cost as much    \
         * as a 1000-element row's loop */                                                       \
        *res = RED(a0);                                                                          \
        return !nan;                                                                             \
    }
MM512_(max_f32_512, _mm512_max_ps, _mm512_reduce_max_ps)
MM512_(min_f32_512, _mm512_min_ps, _mm512_reduce_min_ps)
#undef MM512_

static double maxmin_f32(const float *x, int64_t n, bool is_max, double init)
{
    if (n >= 16 && have_avx512()) {
        /* init: the partial so far, a float32 value or +-inf (or NaN, which
         * only the scalar loop keeps) */
        float r = is_max ? -INFINITY : INFINITY;
        if (init == init && (is_max ? max_f32_512(x, n, &r) : min_f32_512(x, n, &r)))
            return is_max ? MAXNAN_(init, (double)r) : MINNAN_(init, (double)r);
    }

    float a[8];
    for (int j = 0; j < 8; j++)
        a[j] = (float)init;
    int64_t i = 0;
    if (is_max) {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                a[j] = MAXNAN_(a[j], x[i + j]);
    } else {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                a[j] = MINNAN_(a[j], x[i + j]);
    }
    double r = init;
    for (int j = 0; j < 8; j++)
        r = is_max ? MAXNAN_(r, (double)a[j]) : MINNAN_(r, (double)a[j]);
    for (; i < n; i++)
        r = is_max ? MAXNAN_(r, (double)x[i]) : MINNAN_(r, (double)x[i]);
    return r;
}

static double maxmin_f64(const double *x, int64_t n, bool is_max, double init)
{
    double a[4] = {init, init, init, init};
    int64_t i = 0;
    if (is_max) {
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; j++)
                a[j] = MAXNAN_(a[j], x[i + j]);
    } else {
        for (; i + 4 <= n; i += 4)
            for (int j = 0; j < 4; j++)
                a[j] = MINNAN_(a[j], x[i + j]);
    }
    double r = init;
    for (int j = 0; j < 4; j++)
        r = is_max ? MAXNAN_(r, a[j]) : MINNAN_(r, a[j]);
    for (; i < n; i++)
        r = is_max ? MAXNAN_(r, x[i]) : MINNAN_(r, x[i]);
    return r;
}

/* Products of x[0, n): a left-to-right loop is a chain of dependent
 * multiplies, one multiply's latency per element (prod over 1000x1000 rows
 * took 410 us, torch 30), so the AVX-512 loops keep four vectors of partial
 * products, and the portable ones four scalars. The double product's order
 * differs from the loop's, as torch's vectorised one does; the uint64 one
 * (modular) is the same in any order. */
/* The product of the 8 lanes of a. Long products of numbers below 1 end
 * far below the smallest double, and a multiply whose result underflows
 * takes a microcode assist (on this AMD host ~90 cycles: a third of a
 * 1000-element row's time). So when the lanes are finite and nonzero and
 * their exponents sum to -1084 or less, the product (below 2^(sum + 8) <=
 * 2^-1076) is a signed zero without multiplying. Inlined: gcc puts no
 * vzeroupper in a function that takes a 512-bit argument, nor after a call
 * to one, so an out-of-line copy returned to run_update's SSE code with the
 * upper halves dirty, and that code's next scalar multiply cost ~95 % of
 * its time (prod over 1000x1000 rows: 140 us, torch 50-80). */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) double lanes_prod_512(__m512d a)
{
    double es = _mm512_reduce_add_pd(_mm512_getexp_pd(a)); /* -inf for a zero lane, NaN for inf or NaN */
    if (es <= -1084.0 && es > -INFINITY) {
        __mmask8 neg = _mm512_cmp_pd_mask(a, _mm512_setzero_pd(), _CMP_LT_OQ);
        return __builtin_popcount(neg) & 1 ? -0.0 : 0.0;
    }
    return _mm512_reduce_mul_pd(a);
}

#define PROD_512_(name, T, LOAD)                                                               \
    __attribute__((target("avx512f"))) static double name(const T *x, int64_t n)              \
    {                                                                                          \
        __m512d a0 = _mm512_set1_pd(1.0), a1 = a0, a2 = a0, a3 = a0;                           \
        int64_t i = 0;                                                                         \
        for (; i + 32 <= n; i += 32) {                                                         \
            a0 = _mm512_mul_pd(a0, LOAD(x + i));                                               \
            a1 = _mm512_mul_pd(a1, LOAD(x + i + 8));                                           \
            a2 = _mm512_mul_pd(a2, LOAD(x + i + 16));                                          \
            a3 = _mm512_mul_pd(a3, LOAD(x + i + 24));                                          \
        }                                                                                      \
        a0 = _mm512_mul_pd(_mm512_mul_pd(a0, a1), _mm512_mul_pd(a2, a3));                      \
        for (; i + 8 <= n; i += 8)                                                             \
            a0 = _mm512_mul_pd(a0, LOAD(x + i));                                               \
        double r = lanes_prod_512(a0);                                                         \
        for (; i < n; i++)                                                                     \
            r *= x[i];                                                                         \
        return r;                                                                              \
    }
#define LOAD_F32_(p) _mm512_cvtps_pd(_mm256_loadu_ps(p))
PROD_512_(prod_f32_512, float, LOAD_F32_)
PROD_512_(prod_f64_512, double, _mm512_loadu_pd)
#undef LOAD_F32_
#undef PROD_512_

#define PROD4_(name, T, ACC)                                                                   \
    static ACC name(const T *x, int64_t n)                                                     \
    {                                                                                          \
        ACC a0 = 1, a1 = 1, a2 = 1, a3 = 1;                                                    \
        int64_t i = 0;                                                                         \
        for (; i + 4 <= n; i += 4) {                                                           \
            a0 *= (ACC)x[i];                                                                   \
            a1 *= (ACC)x[i + 1];                                                               \
            a2 *= (ACC)x[i + 2];                                                               \
            a3 *= (ACC)x[i + 3];                                                               \
        }                                                                                      \
        for (; i < n; i++)                                                                     \
            a0 *= (ACC)x[i];                                                                   \
        return (a0 * a1) * (a2 * a3);                                                          \
    }
PROD4_(prod4_f64, double, double)
PROD4_(prod4_u64, uint64_t, uint64_t)
#undef PROD4_

static double prod_f64(const double *x, int64_t n)
{
    return have_avx512() ? prod_f64_512(x, n) : prod4_f64(x, n);
}

/* ---- one run of reduced elements into a partial ------------------------------ */

/* argmax / argmin over a contiguous float32 run, continuing a->m / a->idx:
 * the scalar rule (the first element above / below the best, or the first
 * NaN, wins) walked one block of 16 at a time, and a block holding neither
 * a better element nor a NaN skipped after one compare (random data leave
 * nearly every block behind: argmax of 1e6 floats in rows of 1000, 530 ->
 * 61 us). */
#define ARGEXT_512_(name, CMP)                                                                   \
    __attribute__((target("avx512f"))) static void name(const float *x, int64_t n, int64_t idx0, \
                                                        bool mx, part *a)                        \
    {                                                                                            \
        for (int64_t i = 0; i < n;) {                                                            \
            if (a->idx >= 0) {                                                                   \
                if (a->m != a->m)                                                                \
                    return; /* a NaN was found: nothing later can win */                         \
                const __m512 best = _mm512_set1_ps((float)a->m); /* a float32 value: exact */   \
                for (; i + 16 <= n; i += 16) {                                                   \
                    __m512 v = _mm512_loadu_ps(x + i);                                           \
                    if (_mm512_cmp_ps_mask(v, best, CMP) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) \
                        break;                                                                   \
                }                                                                                \
            }                                                                                    \
            for (int64_t e = i + 16 < n ? i + 16 : n; i < e; i++) {                              \
                double v = x[i];                                                                 \
                if (a->idx < 0 || (mx ? v > a->m : v < a->m) || v != v) {                        \
                    a->m = v;                                                                    \
                    a->idx = idx0 + i;                                                           \
                    if (v != v)                                                                  \
                        return;                                                                  \
                }                                                                                \
            }                                                                                    \
        }                                                                                        \
    }
ARGEXT_512_(argmax_f32_512, _CMP_GT_OQ)
ARGEXT_512_(argmin_f32_512, _CMP_LT_OQ)
#undef ARGEXT_512_

/* pass 0: sum / max / min / argmax, and var's sum of (x - mean) with mean
 * holding the shift K; pass 1: var's squared deviations from mean.
 * idx0: R-space index of the run's first element. */
static void run_update(const red_plan *P, const char *p, int64_t stride, int64_t n, int64_t idx0,
                       int pass, double mean, part *a)
{
    od_reduce_kind k = P->kind;
    bool sumlike = k == OD_RED_SUM || k == OD_RED_MEAN || k == OD_RED_VAR;
    if (P->acc_float && stride == 1 && (P->w == OD_FLOAT32 || P->w == OD_FLOAT64) &&
        k != OD_RED_ARGMAX && k != OD_RED_ARGMIN && k != OD_RED_PROD) {
        bool f32 = P->w == OD_FLOAT32;
        const void *x = p;
        if (sumlike && pass == 0 && k == OD_RED_VAR)
            kadd(&a->s, &a->c, f32 ? sumdev_f32(x, n, mean) : sumdev_f64(x, n, mean));
        else if (sumlike && pass == 0)
            kadd(&a->s, &a->c, f32 ? od_cpu_sum_f32(x, n) : od_cpu_sum_f64(x, n));
        else if (sumlike)
            kadd(&a->s, &a->c, f32 ? od_cpu_sqdev_f32(x, n, mean) : od_cpu_sqdev_f64(x, n, mean));
        else
            a->m = f32 ? maxmin_f32(x, n, k == OD_RED_AMAX, a->m)
                       : maxmin_f64(x, n, k == OD_RED_AMAX, a->m);
        return;
    }
    if (k == OD_RED_PROD && P->acc_float && stride == 1 && (P->w == OD_FLOAT32 || P->w == OD_FLOAT64) &&
        have_avx512()) {
        a->s *= P->w == OD_FLOAT32 ? prod_f32_512((const float *)(const void *)p, n)
                                   : prod_f64_512((const double *)(const void *)p, n);
        return;
    }
    if ((k == OD_RED_ARGMAX || k == OD_RED_ARGMIN) && P->acc_float && stride == 1 && P->w == OD_FLOAT32 &&
        have_avx512()) {
        (k == OD_RED_ARGMAX ? argmax_f32_512 : argmin_f32_512)((const float *)(const void *)p, n, idx0,
                                                               k == OD_RED_ARGMAX, a);
        return;
    }
    double bd[RBUF];
    int64_t bi[RBUF];
    for (int64_t c = 0; c < n; c += RBUF) {
        int64_t len = n - c < RBUF ? n - c : RBUF;
        const char *q = p + (size_t)(c * stride) * P->esz;
        if (P->acc_float) {
            gather_f64(q, P->w, stride, len, bd);
            switch (k) {
            case OD_RED_SUM:
            case OD_RED_MEAN:
            case OD_RED_VAR:
                kadd(&a->s, &a->c,
                     pass == 1           ? od_cpu_sqdev_f64(bd, len, mean)
                     : k == OD_RED_VAR ? sumdev_f64(bd, len, mean)
                                       : od_cpu_sum_f64(bd, len));
                break;
            case OD_RED_AMAX:
            case OD_RED_AMIN:
                a->m = maxmin_f64(bd, len, k == OD_RED_AMAX, a->m);
                break;
            case OD_RED_PROD:
                a->s *= prod_f64(bd, len);
                break;
            case OD_RED_ARGMAX:
            case OD_RED_ARGMIN:
                if (a->idx >= 0 && a->m != a->m)
                    return; /* a NaN was found: nothing later can win */
                for (int64_t i = 0; i < len; i++) {
                    double v = bd[i];
                    if (a->idx < 0 || (k == OD_RED_ARGMAX ? v > a->m : v < a->m) || v != v) {
                        a->m = v;
                        a->idx = idx0 + c + i;
                        if (v != v)
                            return;
                    }
                }
                break;
            }
        } else {
            gather_i64(q, P->w, stride, len, bi);
            switch (k) {
            case OD_RED_SUM:
            case OD_RED_MEAN:
            case OD_RED_VAR: {
                uint64_t u = 0;
                for (int64_t i = 0; i < len; i++)
                    u += (uint64_t)bi[i];
                a->u += u;
                break;
            }
            case OD_RED_AMAX:
                for (int64_t i = 0; i < len; i++)
                    a->im = bi[i] > a->im ? bi[i] : a->im;
                break;
            case OD_RED_AMIN:
                for (int64_t i = 0; i < len; i++)
                    a->im = bi[i] < a->im ? bi[i] : a->im;
                break;
            case OD_RED_PROD:
                a->u *= prod4_u64((const uint64_t *)(const void *)bi, len);
                break;
            case OD_RED_ARGMAX:
            case OD_RED_ARGMIN:
                for (int64_t i = 0; i < len; i++)
                    if (a->idx < 0 || (k == OD_RED_ARGMAX ? bi[i] > a->im : bi[i] < a->im)) {
                        a->im = bi[i];
                        a->idx = idx0 + c + i;
                    }
                break;
            }
        }
    }
}

/* Folds b (covering later elements) into a. */
static void part_combine(const red_plan *P, part *a, const part *b)
{
    switch (P->kind) {
    case OD_RED_SUM:
    case OD_RED_MEAN:
    case OD_RED_VAR:
        kadd(&a->s, &a->c, b->s);
        a->c += b->c;
        a->u += b->u;
        break;
    case OD_RED_AMAX:
        a->m = MAXNAN_(a->m, b->m);
        a->im = b->im > a->im ? b->im : a->im;
        break;
    case OD_RED_AMIN:
        a->m = MINNAN_(a->m, b->m);
        a->im = b->im < a->im ? b->im : a->im;
        break;
    case OD_RED_PROD:
        a->s *= b->s;
        a->u *= b->u;
        break;
    case OD_RED_ARGMAX:
    case OD_RED_ARGMIN: {
        bool mx = P->kind == OD_RED_ARGMAX;
        if (b->idx < 0 || (a->idx >= 0 && P->acc_float && a->m != a->m))
            break;
        if (a->idx < 0 || (P->acc_float ? ((mx ? b->m > a->m : b->m < a->m) || b->m != b->m)
                                        : (mx ? b->im > a->im : b->im < a->im)))
            *a = *b;
        break;
    }
    }
}

/* Reduces R-space indices [r0, r1) of the output whose data starts at base. */
static void reduce_range(const red_plan *P, const char *base, int64_t r0, int64_t r1, int pass,
                         double mean, part *a)
{
    int nr = P->nr;
    int64_t n0 = P->rsize[nr - 1], s0 = P->rstride[nr - 1];
    int64_t q = r0 / n0, i = r0 % n0;
    int64_t ix[OD_MAX_DIMS];
    int64_t off = 0;
    for (int d = nr - 2; d >= 0; d--) {
        ix[d] = q % P->rsize[d];
        q /= P->rsize[d];
        off += ix[d] * P->rstride[d];
    }
    while (r0 < r1) {
        int64_t len = n0 - i < r1 - r0 ? n0 - i : r1 - r0;
        run_update(P, base + (size_t)(off + i * s0) * P->esz, s0, len, r0, pass, mean, a);
        r0 += len;
        i = 0;
        for (int d = nr - 2; d >= 0; d--) {
            off += P->rstride[d];
            if (++ix[d] < P->rsize[d])
                break;
            off -= ix[d] * P->rstride[d];
            ix[d] = 0;
        }
    }
}

static double var_of(const red_plan *P, double m2)
{
    /* torch 1.13's float32/float64 full reduction (std_var_all) takes
     * N - correction in int64, wrapping at the extremes (correction =
     * INT64_MIN: a negative divisor, so 0, inf or nan); its other paths take
     * it in double */
    bool wraps = (P->out_dtype == OD_FLOAT32 || P->out_dtype == OD_FLOAT64) && P->M == 1;
    double div = wraps ? (double)(int64_t)((uint64_t)P->N - (uint64_t)P->correction)
                       : (double)P->N - (double)P->correction;
    return m2 / (div > 0.0 ? div : 0.0);
}

/* Writes the final value of output o from its (complete) partial. */
static void finish(const red_plan *P, int64_t o, const part *a)
{
    switch (P->kind) {
    case OD_RED_SUM:
        if (P->acc_float)
            store_f64(P->out, P->out_dtype, o, ksum(a->s, a->c));
        else
            store_i64(P->out, P->out_dtype, o, (int64_t)a->u);
        break;
    case OD_RED_MEAN:
        store_f64(P->out, P->out_dtype, o, ksum(a->s, a->c) / (double)P->N);
        break;
    case OD_RED_VAR:
        store_f64(P->out, P->out_dtype, o, var_of(P, ksum(a->s, a->c)));
        break;
    case OD_RED_AMAX:
    case OD_RED_AMIN:
        if (P->acc_float)
            store_f64(P->out, P->out_dtype, o, a->m);
        else
            store_i64(P->out, P->out_dtype, o, a->im);
        break;
    case OD_RED_PROD:
        if (P->acc_float)
            store_f64(P->out, P->out_dtype, o, a->s);
        else
            store_i64(P->out, P->out_dtype, o, (int64_t)a->u);
        break;
    case OD_RED_ARGMAX:
    case OD_RED_ARGMIN:
        store_i64(P->out, P->out_dtype, o, a->idx);
        break;
    }
}

/* ---- row mode ------------------------------------------------------------------ */

/* var's shift K: the output's first reduced element (R-space index 0 is at
 * offset 0 from its base). */
static double first_value(const red_plan *P, const char *base)
{
    double k;
    gather_f64(base, P->w, 0, 1, &k);
    return k;
}

static void reduce_one(const red_plan *P, const char *base, part *a)
{
    part_init(P, a);
    if (P->kind != OD_RED_VAR) {
        reduce_range(P, base, 0, P->N, 0, 0.0, a);
        return;
    }
    double k = first_value(P, base);
    reduce_range(P, base, 0, P->N, 0, k, a);
    double mean = k + ksum(a->s, a->c) / (double)P->N;
    a->s = a->c = 0.0;
    reduce_range(P, base, 0, P->N, 1, mean, a);
}

/* ix / off step to the next output (row-major over the kept dims) */
static inline void next_row(const red_plan *P, int64_t *ix, int64_t *off)
{
    for (int d = P->nk - 1; d >= 0; d--) {
        *off += P->kstride[d];
        if (++ix[d] < P->ksize[d])
            break;
        *off -= ix[d] * P->kstride[d];
        ix[d] = 0;
    }
}

/* float32 sum / mean of many short contiguous rows (a global average pool's
 * mean over H x W): per row, the call chain above costs more than the sum.
 * Four rows at a time, each row's accumulators of lanes_sum_f32 held as
 * vectors and added up in its order (the four as (a0 + a1) + (a2 + a3), then
 * the blocks of eight, then the lanes ((l0 + l1) + (l2 + l3)) + ((l4 + l5) +
 * (l6 + l7)), then the tail): the same bits as run_update's path, with the
 * rows' chains overlapping (out of order: the loads go row after row). */
#define ROWS 4
/* Rows at least this long go through lanes_sum_f32_512 one by one (the same
 * bits): from DRAM this kernel's four loops ran at 23-43 GB/s on one thread
 * depending on nothing but where the linker put them (rows of 1000 floats,
 * 1.5 or 2.8 ms for 64 MB across rebuilds), where that single loop held
 * 43 GB/s in every build measured; in cache it costs ~10 % at 1000. */
#define LONG_ROW 256
__attribute__((target("avx512f"))) static void rows_sum_f32_512(const float *const *x, int64_t n, double *out)
{
    /* named accumulators: an array indexed in the loop stays in memory */
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
    int64_t i = 0;
    if (n >= 32) {
        /* row r's accumulator k in b<r><k> (16 of the 32 zmm registers) */
        __m512d b01 = a0, b02 = a0, b03 = a0, b11 = a0, b12 = a0, b13 = a0;
        __m512d b21 = a0, b22 = a0, b23 = a0, b31 = a0, b32 = a0, b33 = a0;
        /* one row after another, each read in memory order: interleaving
         * the four rows' loads made a contiguous block of rows four
         * short streams, which cost up to 1.8x in time once the rows come
         * from DRAM (rows of 128 floats) */
#define LDX_(r, k) _mm512_cvtps_pd(_mm256_loadu_ps(x##r + j + 8 * (k)))
#define ROW_(r)                                                                                  \
        for (int64_t j = 0; j + 32 <= n; j += 32) {                                             \
            a##r = _mm512_add_pd(a##r, LDX_(r, 0)), b##r##1 = _mm512_add_pd(b##r##1, LDX_(r, 1)); \
            b##r##2 = _mm512_add_pd(b##r##2, LDX_(r, 2)), b##r##3 = _mm512_add_pd(b##r##3, LDX_(r, 3)); \
        }
        ROW_(0)
        ROW_(1)
        ROW_(2)
        ROW_(3)
#undef ROW_
#undef LDX_
        i = n - n % 32;
        a0 = _mm512_add_pd(_mm512_add_pd(a0, b01), _mm512_add_pd(b02, b03));
        a1 = _mm512_add_pd(_mm512_add_pd(a1, b11), _mm512_add_pd(b12, b13));
        a2 = _mm512_add_pd(_mm512_add_pd(a2, b21), _mm512_add_pd(b22, b23));
        a3 = _mm512_add_pd(_mm512_add_pd(a3, b31), _mm512_add_pd(b32, b33));
    }
    for (int64_t j = i; j + 8 <= n; j += 8)
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x0 + j)));
    for (int64_t j = i; j + 8 <= n; j += 8)
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x1 + j)));
    for (int64_t j = i; j + 8 <= n; j += 8)
        a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(x2 + j)));
    for (; i + 8 <= n; i += 8)
        a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(x3 + i)));
    /* the four rows reduced together, pairs first: s01 holds rows 0 and 1's
     * (a0 + a1), (a2 + a3), ... interleaved, 128-bit lane k = pair k */
    __m512d s01 = _mm512_add_pd(_mm512_unpacklo_pd(a0, a1), _mm512_unpackhi_pd(a0, a1));
    __m512d s23 = _mm512_add_pd(_mm512_unpacklo_pd(a2, a3), _mm512_unpackhi_pd(a2, a3));
    /* (a0 + a1) + (a2 + a3) and (a4 + a5) + (a6 + a7): lanes 0, 2 of each + lanes 1, 3 */
    __m512d u = _mm512_add_pd(_mm512_shuffle_f64x2(s01, s23, 0x88), _mm512_shuffle_f64x2(s01, s23, 0xdd));
    /* the two halves: lane 0 = rows 0, 1, lane 2 = rows 2, 3 */
    __m512d w = _mm512_add_pd(u, _mm512_shuffle_f64x2(u, u, 0xb1));
    __m256d sum = _mm512_castpd512_pd256(_mm512_permutexvar_pd(_mm512_set_epi64(0, 0, 0, 0, 5, 4, 1, 0), w));
    for (; i < n; i++) /* the tail, in order, each row's own */
        sum = _mm256_add_pd(sum, _mm256_set_pd(x3[i], x2[i], x1[i], x0[i]));
    _mm256_storeu_pd(out, sum);
}

/* four float32 results from their sums, as the scalar path below computes
 * each (+ 0.0, / div, rounded to float; division is exact-rounded in both),
 * one vector division where the scalar loop waited on four */
__attribute__((target("avx512f"))) static void rows_store_f32_512(const double *sums, double div, float *y)
{
    __m256d v = _mm256_add_pd(_mm256_loadu_pd(sums), _mm256_setzero_pd());
    _mm_storeu_ps(y, _mm256_cvtpd_ps(_mm256_div_pd(v, _mm256_set1_pd(div))));
}

static bool rows_f32(const red_plan *P)
{
    return have_avx512() && P->acc_float && P->w == OD_FLOAT32 && (P->kind == OD_RED_SUM || P->kind == OD_RED_MEAN) &&
           P->nr == 1 && P->rstride[0] == 1 && P->N > 0;
}

/* float32 amax / amin of contiguous rows: straight to the AVX-512 lanes, as
 * the call chain of reduce_one (index arithmetic, dispatch on kind and
 * dtype) costs about a tenth of a 1000-element row. */
static bool rows_maxmin_f32(const red_plan *P)
{
    return have_avx512() && P->w == OD_FLOAT32 && (P->kind == OD_RED_AMAX || P->kind == OD_RED_AMIN) &&
           P->nr == 1 && P->rstride[0] == 1 && P->N >= 16;
}

static void row_maxmin_f32(const red_plan *P, const float *x, int64_t o)
{
    bool mx = P->kind == OD_RED_AMAX;
    float r = mx ? -INFINITY : INFINITY;
    part a;
    part_init(P, &a);
    if (mx ? max_f32_512(x, P->N, &r) : min_f32_512(x, P->N, &r))
        a.m = r;
    else /* a NaN: the NaN-propagating loop */
        a.m = maxmin_f32(x, P->N, mx, a.m);
    finish(P, o, &a);
}

/* a float32 sum's (div 1) or mean's (div N) result: finish's value of one
 * kadd from zero, where + 0.0 turns -0 into +0 as kadd does; x / 1.0 is x */
static inline float f32_of_sum(double sum, double div)
{
    return (float)((sum + 0.0) / div);
}

/* the sums of rows[0, nrows) (nrows <= ROWS; the rest repeat rows[0]) */
__attribute__((target("avx512f"))) static void rows_sums_512(const red_plan *P, const float **rows, int nrows,
                                                             double *sums)
{
    for (int r = nrows; r < ROWS; r++)
        rows[r] = rows[0];
    if (P->N >= LONG_ROW)
        for (int r = 0; r < ROWS; r++)
            sums[r] = lanes_sum_f32_512(rows[r], P->N, 0.0);
    else
        rows_sum_f32_512(rows, P->N, sums);
}

/* rows [o, end) of a float32 sum / mean into float32, rows shorter than
 * LONG_ROW: row_task's loop inside one AVX-512 function, so the sums and
 * the store inline (the calls per four rows of 49, a global average
 * pool's, and the row pointer array had been about a fifth of the time) */
__attribute__((target("avx512f"))) static void rows_short_f32_512(const red_plan *P, int64_t o, int64_t end,
                                                                  int64_t *ix, int64_t off)
{
    double div = P->kind == OD_RED_MEAN ? (double)P->N : 1.0, sums[ROWS];
    const float *rows[ROWS];
    for (; o + ROWS <= end; o += ROWS) {
        for (int r = 0; r < ROWS; r++) {
            rows[r] = (const float *)(const void *)(P->base + (size_t)off * P->esz);
            next_row(P, ix, &off);
        }
        rows_sum_f32_512(rows, P->N, sums);
        rows_store_f32_512(sums, div, (float *)(void *)P->out + o);
    }
    int nrows = 0;
    for (int64_t q = o; q < end; q++, nrows++) {
        rows[nrows] = (const float *)(const void *)(P->base + (size_t)off * P->esz);
        next_row(P, ix, &off);
    }
    if (nrows == 0)
        return;
    rows_sums_512(P, rows, nrows, sums);
    for (int r = 0; r < nrows; r++)
        ((float *)(void *)P->out)[o + r] = f32_of_sum(sums[r], div);
}

static void row_task(void *ctx, int64_t begin, int64_t end)
{
    const red_plan *P = ctx;
    int64_t ix[OD_MAX_DIMS], off = 0, q = begin;
    for (int d = P->nk - 1; d >= 0; d--) {
        ix[d] = q % P->ksize[d];
        q /= P->ksize[d];
        off += ix[d] * P->kstride[d];
    }
    bool fast = rows_f32(P), fastmm = rows_maxmin_f32(P);
    if (fast && P->out_dtype == OD_FLOAT32 && P->N < LONG_ROW) {
        rows_short_f32_512(P, begin, end, ix, off);
        return;
    }
    const float *rows[ROWS];
    int nrows = 0;
    for (int64_t o = begin; o < end; o++) {
        if (fastmm) {
            row_maxmin_f32(P, (const float *)(const void *)(P->base + (size_t)off * P->esz), o);
        } else if (fast) {
            rows[nrows++] = (const float *)(const void *)(P->base + (size_t)off * P->esz);
            if (nrows == ROWS || o == end - 1) {
                double sums[ROWS];
                rows_sums_512(P, rows, nrows, sums);
                if (nrows == ROWS && P->out_dtype == OD_FLOAT32) {
                    rows_store_f32_512(sums, P->kind == OD_RED_MEAN ? (double)P->N : 1.0,
                                       (float *)(void *)P->out + o - ROWS + 1);
                    nrows = 0;
                }
                for (int r = 0; r < nrows; r++) {
                    if (P->out_dtype == OD_FLOAT32) {
                        ((float *)(void *)P->out)[o - nrows + 1 + r] =
                            f32_of_sum(sums[r], P->kind == OD_RED_MEAN ? (double)P->N : 1.0);
                        continue;
                    }
                    part a;
                    part_init(P, &a);
                    kadd(&a.s, &a.c, sums[r]);
                    finish(P, o - nrows + 1 + r, &a);
                }
                nrows = 0;
            }
        } else {
            part a;
            reduce_one(P, P->base + (size_t)off * P->esz, &a);
            finish(P, o, &a);
        }
        next_row(P, ix, &off);
    }
}

/* Few outputs, many elements each: split each output's run across threads. */
typedef struct split_ctx {
    const red_plan *P;
    const char *base;
    part *parts;
    int pass;
    double mean;
} split_ctx;

static void split_task(void *ctx, int64_t begin, int64_t end)
{
    split_ctx *c = ctx;
    for (int64_t t = begin; t < end; t++) {
        int64_t r0 = t * SPLIT_CHUNK;
        int64_t r1 = r0 + SPLIT_CHUNK < c->P->N ? r0 + SPLIT_CHUNK : c->P->N;
        part_init(c->P, &c->parts[t]);
        reduce_range(c->P, c->base, r0, r1, c->pass, c->mean, &c->parts[t]);
    }
}

static od_status reduce_split(const red_plan *P, od_error *err)
{
    int64_t nchunks = (P->N + SPLIT_CHUNK - 1) / SPLIT_CHUNK;
    part *parts = malloc((size_t)nchunks * sizeof *parts);
    if (!parts)
        return od_error_set(err, OD_ENOMEM, "reduction: out of memory for %lld partial results",
                            (long long)nchunks);
    int64_t ix[OD_MAX_DIMS] = {0}, off = 0;
    for (int64_t o = 0; o < P->M; o++) {
        split_ctx c = {P, P->base + (size_t)off * P->esz, parts, 0, 0.0};
        double k = P->kind == OD_RED_VAR ? first_value(P, c.base) : 0.0;
        c.mean = k;
        part a;
        for (int pass = 0; pass < (P->kind == OD_RED_VAR ? 2 : 1); pass++) {
            c.pass = pass;
            od_parallel_for(nchunks, 1, split_task, &c);
            a = parts[0];
            for (int64_t t = 1; t < nchunks; t++)
                part_combine(P, &a, &parts[t]);
            c.mean = k + ksum(a.s, a.c) / (double)P->N;
        }
        finish(P, o, &a);
        next_row(P, ix, &off);
    }
    free(parts);
    return OD_OK;
}

/* ---- column mode ----------------------------------------------------------------- */

/* Outputs along the last kept dim (stride ks in the input) are updated
 * together, COLB at a time, while the reduced dims are walked in order. */
static void col_block(const red_plan *P, const char *base, int64_t o0, int64_t b)
{
    int64_t ks = P->kstride[P->nk - 1];
    od_reduce_kind k = P->kind;
    double s[COLB], cs[COLB], m[COLB], mean[COLB], bd[COLB];
    uint64_t u[COLB];
    int64_t im[COLB], idx[COLB], bi[COLB];
    part init;
    part_init(P, &init);
    for (int64_t j = 0; j < b; j++) {
        s[j] = init.s;
        cs[j] = 0.0;
        u[j] = init.u;
        m[j] = init.m;
        im[j] = init.im;
        idx[j] = -1;
    }
    int passes = k == OD_RED_VAR ? 2 : 1;
    if (k == OD_RED_VAR) /* the shift K: the first reduced row (offset 0) */
        gather_f64(base, P->w, ks, b, mean);
    for (int pass = 0; pass < passes; pass++) {
        int64_t ix[OD_MAX_DIMS] = {0}, off = 0;
        for (int64_t r = 0; r < P->N; r++) {
            const char *q = base + (size_t)off * P->esz;
            if (P->acc_float) {
                gather_f64(q, P->w, ks, b, bd);
                switch (k) {
                case OD_RED_SUM:
                case OD_RED_MEAN:
                case OD_RED_VAR:
                    if (pass == 0 && k == OD_RED_VAR)
                        for (int64_t j = 0; j < b; j++)
                            kadd(&s[j], &cs[j], bd[j] - mean[j]);
                    else if (pass == 0)
                        for (int64_t j = 0; j < b; j++)
                            kadd(&s[j], &cs[j], bd[j]);
                    else
                        for (int64_t j = 0; j < b; j++) {
                            double d = bd[j] - mean[j];
                            kadd(&s[j], &cs[j], d * d);
                        }
                    break;
                case OD_RED_AMAX:
                    for (int64_t j = 0; j < b; j++)
                        m[j] = MAXNAN_(m[j], bd[j]);
                    break;
                case OD_RED_AMIN:
                    for (int64_t j = 0; j < b; j++)
                        m[j] = MINNAN_(m[j], bd[j]);
                    break;
                case OD_RED_PROD:
                    for (int64_t j = 0; j < b; j++)
                        s[j] *= bd[j];
                    break;
                case OD_RED_ARGMAX:
                case OD_RED_ARGMIN:
                    for (int64_t j = 0; j < b; j++)
                        if (idx[j] < 0 ||
                            (m[j] == m[j] &&
                             ((k == OD_RED_ARGMAX ? bd[j] > m[j] : bd[j] < m[j]) || bd[j] != bd[j]))) {
                            m[j] = bd[j];
                            idx[j] = r;
                        }
                    break;
                }
            } else {
                gather_i64(q, P->w, ks, b, bi);
                switch (k) {
                case OD_RED_SUM:
                case OD_RED_MEAN:
                case OD_RED_VAR:
                    for (int64_t j = 0; j < b; j++)
                        u[j] += (uint64_t)bi[j];
                    break;
                case OD_RED_AMAX:
                    for (int64_t j = 0; j < b; j++)
                        im[j] = bi[j] > im[j] ? bi[j] : im[j];
                    break;
                case OD_RED_AMIN:
                    for (int64_t j = 0; j < b; j++)
                        im[j] = bi[j] < im[j] ? bi[j] : im[j];
                    break;
                case OD_RED_PROD:
                    for (int64_t j = 0; j < b; j++)
                        u[j] *= (uint64_t)bi[j];
                    break;
                case OD_RED_ARGMAX:
                case OD_RED_ARGMIN:
                    for (int64_t j = 0; j < b; j++)
                        if (idx[j] < 0 || (k == OD_RED_ARGMAX ? bi[j] > im[j] : bi[j] < im[j])) {
                            im[j] = bi[j];
                            idx[j] = r;
                        }
                    break;
                }
            }
            for (int d = P->nr - 1; d >= 0; d--) {
                off += P->rstride[d];
                if (++ix[d] < P->rsize[d])
                    break;
                off -= ix[d] * P->rstride[d];
                ix[d] = 0;
            }
        }
        if (pass == 0 && k == OD_RED_VAR)
            for (int64_t j = 0; j < b; j++) {
                mean[j] += ksum(s[j], cs[j]) / (double)P->N;
                s[j] = cs[j] = 0.0;
            }
    }
    for (int64_t j = 0; j < b; j++) {
        part a = {s[j], cs[j], u[j], m[j], im[j], idx[j]};
        finish(P, o0 + j, &a);
    }
}

static void col_task(void *ctx, int64_t begin, int64_t end)
{
    const red_plan *P = ctx;
    int64_t last = P->ksize[P->nk - 1];
    int64_t nb = (last + COLB - 1) / COLB;
    for (int64_t t = begin; t < end; t++) {
        int64_t p = t / nb, j0 = (t % nb) * COLB;
        int64_t b = last - j0 < COLB ? last - j0 : COLB;
        int64_t off = j0 * P->kstride[P->nk - 1], q = p;
        for (int d = P->nk - 2; d >= 0; d--) {
            off += (q % P->ksize[d]) * P->kstride[d];
            q /= P->ksize[d];
        }
        col_block(P, P->base + (size_t)off * P->esz, p * last + j0, b);
    }
}

/* ---- planning -------------------------------------------------------------------- */

/* Merges neighbours (outer d-1, inner d) that form one strided run, keeping the
 * linear order of the multi-index (so argmax's flat index is unchanged). */
static void coalesce(int *n, int64_t *size, int64_t *stride)
{
    int m = 0;
    for (int d = 0; d < *n; d++) {
        if (m > 0 && stride[m - 1] == size[d] * stride[d]) {
            size[m - 1] *= size[d];
            stride[m - 1] = stride[d];
        } else {
            size[m] = size[d];
            stride[m] = stride[d];
            m++;
        }
    }
    *n = m;
}

static void build_plan(red_plan *P, const od_tensor *x, uint32_t mask)
{
    P->nk = P->nr = 0;
    P->M = P->N = 1;
    for (int d = 0; d < x->ndim; d++) {
        bool red = (mask >> d) & 1u;
        if (red)
            P->N *= x->sizes[d];
        else
            P->M *= x->sizes[d];
        if (x->sizes[d] == 1)
            continue;
        if (red) {
            P->rsize[P->nr] = x->sizes[d];
            P->rstride[P->nr++] = x->strides[d];
        } else {
            P->ksize[P->nk] = x->sizes[d];
            P->kstride[P->nk++] = x->strides[d];
        }
    }
    if (P->kind != OD_RED_ARGMAX && P->kind != OD_RED_ARGMIN) {
        /* Order is free: walk the reduced dims outermost-stride first. */
        for (int i = 1; i < P->nr; i++)
            for (int j = i; j > 0 && P->rstride[j - 1] < P->rstride[j]; j--) {
                int64_t ts = P->rsize[j], tt = P->rstride[j];
                P->rsize[j] = P->rsize[j - 1];
                P->rstride[j] = P->rstride[j - 1];
                P->rsize[j - 1] = ts;
                P->rstride[j - 1] = tt;
            }
    }
    coalesce(&P->nk, P->ksize, P->kstride);
    coalesce(&P->nr, P->rsize, P->rstride);
    if (P->nr == 0) {
        P->nr = 1;
        P->rsize[0] = 1;
        P->rstride[0] = 0;
    }
}

static void fill_empty(const red_plan *P)
{
    for (int64_t o = 0; o < P->M; o++) {
        bool one = P->kind == OD_RED_PROD; /* the empty product */
        if ((P->kind == OD_RED_SUM || one) && !P->acc_float)
            store_i64(P->out, P->out_dtype, o, one);
        else
            store_f64(P->out, P->out_dtype, o, one ? 1.0 : P->kind == OD_RED_SUM ? 0.0 : NAN);
    }
}

/* Is every value of dtype `in` exactly representable in `out`? */
static bool cast_is_exact(od_dtype in, od_dtype out)
{
    static const int bits[OD_NUM_DTYPES] = {
        [OD_BOOL] = 1,     [OD_UINT8] = 8,     [OD_INT8] = 7,     [OD_INT16] = 15,    [OD_INT32] = 31,
        [OD_INT64] = 63,   [OD_FLOAT16] = 11,  [OD_BFLOAT16] = 8, [OD_FLOAT32] = 24,  [OD_FLOAT64] = 53,
    };
    if (in == out || in == OD_BOOL)
        return true;
    if (od_dtype_is_floating(in))
        return out == OD_FLOAT64 || (out == OD_FLOAT32 && in != OD_FLOAT64);
    if (od_dtype_is_floating(out))
        return bits[in] <= bits[out];
    return out != OD_BOOL && out != OD_UINT8 && bits[in] <= bits[out]; /* signed and wide enough */
}

od_status od_cpu_reduce(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_reduce_info info;
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_reduce_parse(id, s, &info, err);
    if (st || (st = od_shape_reduce(id, s, &spec, &nouts, err)))
        return st;
    od_tensor *self = s->args[0].u.t, *src = self, *conv = NULL, *out = NULL;
    bool sumlike = info.kind == OD_RED_SUM || info.kind == OD_RED_MEAN || info.kind == OD_RED_PROD;
    if (sumlike && !cast_is_exact(self->dtype, info.out_dtype)) {
        if ((st = od_cpu_to_dtype(self, info.out_dtype, &conv, err)))
            return st;
        src = conv;
    }
    if ((st = od_alloc_outputs(s, &spec, 1, &out, err))) {
        od_tensor_release(conv);
        return st;
    }
    red_plan P;
    memset(&P, 0, sizeof P);
    P.kind = info.kind;
    P.w = src->dtype;
    P.esz = od_dtype_size(src->dtype);
    P.base = od_tensor_data(src);
    P.correction = info.correction;
    P.out_dtype = info.out_dtype;
    P.out = od_tensor_data(out);
    P.acc_float = od_dtype_is_floating(sumlike ? info.out_dtype : src->dtype);
    build_plan(&P, src, info.mask);

    if (P.M > 0 && P.N == 0) {
        fill_empty(&P);
    } else if (P.M > 0) {
        int nt = od_get_num_threads();
        int64_t klast = P.nk > 0 ? P.ksize[P.nk - 1] : 0;
        int64_t rmin = INT64_MAX;
        for (int d = 0; d < P.nr; d++)
            if (P.rsize[d] > 1 && P.rstride[d] < rmin)
                rmin = P.rstride[d];
        if (P.nk > 0 && klast >= 4 && P.kstride[P.nk - 1] < rmin && P.N > 1) {
            int64_t nb = (klast + COLB - 1) / COLB;
            int64_t ntasks = (P.M / klast) * nb;
            int64_t per = (klast < COLB ? klast : COLB) * P.N;
            st = od_parallel_for(ntasks, GRAIN_WORK / per + 1, col_task, &P);
        } else if (P.M < 4 * (int64_t)nt && P.N >= 2 * SPLIT_CHUNK) {
            st = reduce_split(&P, err);
        } else {
            st = od_parallel_for(P.M, GRAIN_WORK / P.N + 1, row_task, &P);
        }
    }
    od_tensor_release(conv);
    return od_cpu_return1(s, out, st);
}
