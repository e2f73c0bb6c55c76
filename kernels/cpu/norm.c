/* norm.c — CPU native_batch_norm, native_group_norm and their backward.
 *
 * Invariants:
 *  - od_norm_plan_of (shape_reduce.c) has checked every argument; outputs
 *    come from od_alloc_outputs. The input, grad_out and parameters are read
 *    through contiguous copies in the compute type (float64 in double,
 *    float32 and bfloat16 in float), viewed as [N, C, S]; results are
 *    written into compute-type buffers and converted into the outputs (and,
 *    for batch norm's running statistics, into the caller's tensors) last.
 *  - Batch norm follows ATen 1.13's batch_norm_cpu: two passes per channel
 *    with the sums in double (eight accumulators where ATen runs one: a mean
 *    can differ from torch's by an ulp; the backward's sums likewise), mean
 *    rounded to the compute type,
 *    var = var_sum / n in the compute type, invstd = 1 / sqrt(var + eps) in
 *    double, 0 where var and eps are both 0 (ATen's InvStd) (for bfloat16:
 *    mean, var_sum and invstd rounded to bfloat16, invstd computed in float,
 *    as ATen keeps save_mean and save_invstd in the input's type), y =
 *    fma(x, alpha, beta) with alpha = invstd * w, beta = fma(-mean, alpha, b)
 *    (the fmas torch's build makes; test_norm.py compares the bits); the
 *    running statistics take momentum and the unbiased variance
 *    (var_sum / (n - 1) in the compute type: NaN for n == 1, as in torch).
 *    They are written in place into the tensors the caller passed (stored
 *    tensors included), without a version bump: torch's schema does not
 *    mark them as written either.
 *  - Group norm follows GroupNormKernelImpl: one row of D * S values per
 *    (n, group), moments by the RowwiseMoments layer norm uses
 *    (od_cpu_row_moments), rstd = 1 / sqrt(max(var, 0) + eps); y =
 *    (x - mean) * rstd without weight and bias, else fma(x, scale, bias)
 *    with bias = -scale * mean + b rounded after the product.
 *  - Channels and rows are split over the thread pool; every task writes
 *    disjoint outputs.
 */
/* As elementwise.c: gcc's default -O2 cost model leaves loops that need a peel or a run-time check scalar
 * (batch norm's x * alpha + beta ran one element at a time). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

#define NORM_GRAIN 32768 /* elements of work per parallel task, at least */

typedef struct norm_ctx {
    const od_norm_plan *p;
    bool f64, bf16;
    const void *x, *dy, *w, *b, *rm, *rv, *mean, *invstd; /* compute type, contiguous; NULL: absent */
    void *y, *smean, *sinvstd, *nrm, *nrv;               /* results in the compute type */
    void *gw, *gb;                                        /* backward: parameter gradients */
    double *ds, *db;                                      /* group norm backward: per (n, c) sums */
    bool stats_bf16; /* batch norm: save_mean and save_invstd are bfloat16 (not the mixed type) */
} norm_ctx;

static inline float bf16_round(float v) { return od_bf16_to_float(od_float_to_bf16(v)); }

/* ---- batch norm ------------------------------------------------------------------- */

#define BN_FNS(T, SUF, FMA, SQ_ADD)                                                                     \
    OD_CPU_CLONES static void bn_stats_##SUF(void *ctx, int64_t c0, int64_t c1)                      \
    {                                                                                                \
        const norm_ctx *k = ctx;                                                                     \
        const od_norm_plan *p = k->p;                                                                \
        const T *x = k->x;                                                                           \
        int64_t N = p->N, C = p->C, S = p->S;                                                        \
        double n = (double)(N * S);                                                                  \
        for (int64_t c = c0; c < c1; c++) {                                                          \
            /* eight double accumulators: one would chain every add on the last (ATen's sums are in    \
             * double too, in its own order) */                                                       \
            double a[8] = {0};                                                                       \
            for (int64_t i = 0; i < N; i++) {                                                        \
                const T *restrict r = x + (i * C + c) * S;                                           \
                int64_t s = 0;                                                                       \
                for (; s + 8 <= S; s += 8)                                                           \
                    for (int u = 0; u < 8; u++)                                                      \
                        a[u] += r[s + u];                                                            \
                for (; s < S; s++)                                                                   \
                    a[0] += r[s];                                                                    \
            }                                                                                        \
            double sum = od_cpu_sum8(a);                                                             \
            T mean = (T)(sum / n);                                                                   \
            if (k->stats_bf16)                                                                       \
                mean = (T)bf16_round((float)mean);                                                   \
            double v[8] = {0};                                                                       \
            for (int64_t i = 0; i < N; i++) {                                                        \
                const T *restrict r = x + (i * C + c) * S;                                           \
                int64_t s = 0;                                                                       \
                for (; s + 8 <= S; s += 8)                                                           \
                    for (int u = 0; u < 8; u++) {                                                    \
                        T d = r[s + u] - mean; /* ATen's (x - mean)^2 in the input's type */         \
                        v[u] = SQ_ADD(d, v[u]);                                                      \
                    }                                                                                \
                for (; s < S; s++) {                                                                 \
                    T d = r[s] - mean;                                                               \
                    v[0] = SQ_ADD(d, v[0]);                                                          \
                }                                                                                    \
            }                                                                                        \
            double vs = od_cpu_sum8(v);                                                              \
            T var_sum = (T)vs; /* ATen keeps var_sum in the input's type */                          \
            /* ATen's InvStd: 0 where the variance and eps are both zero, not 1 / 0 */                \
            double vn = var_sum / (T)n; /* var_sum / n in the input's type (ATen: scalar / int64) */  \
            T invstd = vn != 0 || p->eps != 0 ? (T)(1.0 / sqrt(vn + p->eps)) : (T)0;                 \
            if (k->stats_bf16) { /* bfloat16 var_sum and save_invstd, the transform in float (ATen) */ \
                var_sum = (T)bf16_round((float)var_sum);                                             \
                float vf = (float)var_sum / (float)n;                                                \
                invstd = vf != 0 || p->eps != 0 ? (T)bf16_round(1.0f / sqrtf(vf + (float)p->eps)) : (T)0; \
            }                                                                                        \
            ((T *)k->smean)[c] = mean;                                                               \
            ((T *)k->sinvstd)[c] = invstd;                                                           \
            if (k->rm)                                                                               \
                ((T *)k->nrm)[c] = (T)(p->momentum * mean + (1 - p->momentum) * ((const T *)k->rm)[c]); \
            if (k->rv)                                                                               \
                ((T *)k->nrv)[c] = (T)(p->momentum * (double)(var_sum / (T)(n - 1)) +               \
                                       (1 - p->momentum) * ((const T *)k->rv)[c]);                   \
        }                                                                                            \
    }                                                                                                \
    /* rows r = i * C + c of S values */                                                             \
    OD_CPU_CLONES static void bn_apply_##SUF(void *ctx, int64_t r0, int64_t r1)                      \
    {                                                                                                \
        const norm_ctx *k = ctx;                                                                     \
        const od_norm_plan *p = k->p;                                                                \
        int64_t C = p->C, S = p->S;                                                                  \
        const T *mean = p->train ? k->smean : k->rm;                                                 \
        for (int64_t r = r0; r < r1; r++) {                                                          \
            int64_t c = r % C;                                                                       \
            T invstd = p->train ? ((const T *)k->sinvstd)[c]                                         \
                                : (T)1 / (T)sqrt((double)(((const T *)k->rv)[c] + (T)p->eps));       \
            T alpha = invstd * (k->w ? ((const T *)k->w)[c] : (T)1);                                 \
            T beta = FMA(-mean[c], alpha, k->b ? ((const T *)k->b)[c] : (T)0); /* fused, as torch builds it */ \
            const T *restrict xr = (const T *)k->x + r * S;                                          \
            T *restrict yr = (T *)k->y + r * S;                                                      \
            for (int64_t s = 0; s < S; s++)                                                          \
                yr[s] = FMA(xr[s], alpha, beta); /* torch's build contracts x * a + b */      \
        }                                                                                            \
    }                                                                                                \
    /* per channel: the sums, then grad_input of that channel */                                     \
    OD_CPU_CLONES static void bn_backward_##SUF(void *ctx, int64_t c0, int64_t c1)                   \
    {                                                                                                \
        const norm_ctx *k = ctx;                                                                     \
        const od_norm_plan *p = k->p;                                                                \
        int64_t N = p->N, C = p->C, S = p->S;                                                        \
        double n = (double)(N * S);                                                                  \
        const T *x = k->x, *dy = k->dy;                                                              \
        for (int64_t c = c0; c < c1; c++) {                                                          \
            T mean = p->train ? ((const T *)k->mean)[c] : ((const T *)k->rm)[c];                     \
            T invstd = p->train ? ((const T *)k->invstd)[c]                                          \
                                : (T)(1.0 / sqrt((double)((const T *)k->rv)[c] + p->eps));           \
            T w = k->w ? ((const T *)k->w)[c] : (T)1;                                                \
            /* eight accumulators each, as bn_stats: with one, every add waited for the last       \
             * (2.3x torch's time at 8x64x56x56) */                                                  \
            double sa[8] = {0}, da[8] = {0};                                                         \
            for (int64_t i = 0; i < N; i++) {                                                        \
                const T *restrict xr = x + (i * C + c) * S, *restrict gr = dy + (i * C + c) * S;     \
                int64_t s = 0;                                                                       \
                for (; s + 8 <= S; s += 8)                                                           \
                    for (int u = 0; u < 8; u++) {                                                    \
                        sa[u] += gr[s + u];                                                          \
                        da[u] += (double)(xr[s + u] - mean) * gr[s + u];                             \
                    }                                                                                \
                for (; s < S; s++) {                                                                 \
                    sa[0] += gr[s];                                                                  \
                    da[0] += (double)(xr[s] - mean) * gr[s];                                         \
                }                                                                                    \
            }                                                                                        \
            double sum = od_cpu_sum8(sa);                                                            \
            double dotp = od_cpu_sum8(da);                                                           \
            if (k->y) {                                                                              \
                T *gx = k->y;                                                                        \
                if (p->train) {                                                                      \
                    T kk = (T)(dotp * invstd * invstd / n), gm = (T)(sum / n), wi = invstd * w;      \
                    for (int64_t i = 0; i < N; i++) {                                                \
                        const T *restrict xr = x + (i * C + c) * S, *restrict gr = dy + (i * C + c) * S; \
                        T *restrict o = gx + (i * C + c) * S;                                        \
                        for (int64_t s = 0; s < S; s++)                                              \
                            o[s] = (gr[s] - gm - (xr[s] - mean) * kk) * wi;                          \
                    }                                                                                \
                } else {                                                                             \
                    T wi = invstd * w;                                                               \
                    for (int64_t i = 0; i < N; i++) {                                                \
                        const T *restrict gr = dy + (i * C + c) * S;                                 \
                        T *restrict o = gx + (i * C + c) * S;                                        \
                        for (int64_t s = 0; s < S; s++)                                              \
                            o[s] = gr[s] * wi;                                                       \
                    }                                                                                \
                }                                                                                    \
            }                                                                                        \
            if (k->gw)                                                                               \
                ((T *)k->gw)[c] = (T)(dotp * invstd);                                                \
            if (k->gb)                                                                               \
                ((T *)k->gb)[c] = (T)sum;                                                            \
        }                                                                                            \
    }
/* ATen's var_sum += (x - mean) * (x - mean): torch's build fuses it for double;
 * a float square is rounded to float before the double sum takes it. */
#define BN_SQ_ADD_F64(d, v) fma(d, d, v)
#define BN_SQ_ADD_F32(d, v) ((v) + (double)((d) * (d)))
BN_FNS(double, f64, fma, BN_SQ_ADD_F64)
BN_FNS(float, f32, fmaf, BN_SQ_ADD_F32)

/* ---- group norm ------------------------------------------------------------------- */

/* 1 / sqrt(max(var, 0) + eps), each step rounded to bfloat16, eps too
 * (measured against torch 1.13: with eps in float, a variance near eps,
 * two nearly equal values in a group, came out one or two steps off) */
static float gn_rstd_bf16(float v, double eps)
{
    float var = bf16_round(v < 0 ? 0.0f : v); /* std::max(v, 0): NaN stays */
    return bf16_round(1.0f / bf16_round(sqrtf(bf16_round(var + bf16_round((float)eps)))));
}

/* bfloat16: torch 1.13's scalar loop in c10::BFloat16 arithmetic, every
 * step rounded to bfloat16 (mean, rstd, scale, bias, each product and sum). */
static void gn_row_bf16(const norm_ctx *k, const float *xr, float *yr, int64_t g, float m, float v)
{
    const od_norm_plan *p = k->p;
    int64_t D = p->C / p->G, S = p->S;
    float mean = bf16_round(m), rstd = gn_rstd_bf16(v, p->eps);
    const float *w = k->w, *b = k->b;
    for (int64_t j = 0; j < D; j++) {
        int64_t c = g * D + j;
        const float *xs = xr + j * S;
        float *ys = yr + j * S;
        if (!w && !b) {
            for (int64_t s = 0; s < S; s++)
                ys[s] = bf16_round(bf16_round(xs[s] - mean) * rstd);
            continue;
        }
        float scale = bf16_round(rstd * (w ? w[c] : 1.0f));
        float bias = bf16_round(bf16_round(-scale * mean) + (b ? b[c] : 0.0f));
        for (int64_t s = 0; s < S; s++)
            ys[s] = bf16_round(bf16_round(scale * xs[s]) + bias);
    }
}

#define GN_FNS(T, SUF, FMA)                                                                             \
    /* rows i = n * G + g of D * S values */                                                         \
    OD_CPU_CLONES static void gn_forward_##SUF(void *ctx, int64_t i0, int64_t i1)                              \
    {                                                                                                \
        const norm_ctx *k = ctx;                                                                     \
        const od_norm_plan *p = k->p;                                                                \
        int64_t G = p->G, D = p->C / p->G, S = p->S, L = D * S;                                      \
        for (int64_t i = i0; i < i1; i++) {                                                          \
            const T *xr = (const T *)k->x + i * L;                                                   \
            T *yr = (T *)k->y + i * L;                                                               \
            double m, v;                                                                             \
            od_cpu_row_moments(k->f64 ? OD_ROW_MOMENTS_F64 : k->bf16 ? OD_ROW_MOMENTS_BF16_ARITH     \
                                                                     : OD_ROW_MOMENTS_F32,           \
                               xr, L, &m, &v);                                                       \
            T mean = (T)m, var = (T)v;                                                               \
            T rstd = (T)1 / (T)sqrt((double)((var < 0 ? (T)0 : var) + (T)p->eps));                  \
            int64_t g = i % G;                                                                       \
            if (k->bf16) {                                                                           \
                gn_row_bf16(k, (const float *)(const void *)xr, (float *)(void *)yr, g, (float)m,    \
                            (float)v);                                                               \
                ((T *)k->smean)[i] = (T)bf16_round((float)m);                                        \
                ((T *)k->sinvstd)[i] = (T)gn_rstd_bf16((float)v, p->eps);                            \
                continue;                                                                            \
            }                                                                                        \
            if (!k->w && !k->b) {                                                                    \
                /* torch's branch without weight and bias: x - mean first, which the                 \
                 * scale-and-bias form loses when the values of a group nearly agree */              \
                for (int64_t s = 0; s < L; s++)                                                      \
                    yr[s] = (xr[s] - mean) * rstd;                                                   \
                ((T *)k->smean)[i] = mean;                                                           \
                ((T *)k->sinvstd)[i] = rstd;                                                         \
                continue;                                                                            \
            }                                                                                        \
            for (int64_t j = 0; j < D; j++) {                                                        \
                int64_t c = g * D + j;                                                               \
                T scale = rstd * (k->w ? ((const T *)k->w)[c] : (T)1);                               \
                /* torch's product is rounded before the add, its x * scale + bias is one      \
                 * fma (measured against torch 1.13 with its own mean and rstd) */              \
                T bias = -scale * mean + (k->b ? ((const T *)k->b)[c] : (T)0);                       \
                const T *restrict xs = xr + j * S;                                                   \
                T *restrict ys = yr + j * S;                                                         \
                for (int64_t s = 0; s < S; s++)                                                      \
                    ys[s] = FMA(scale, xs[s], bias);                                                 \
            }                                                                                        \
            ((T *)k->smean)[i] = mean;                                                               \
            ((T *)k->sinvstd)[i] = rstd;                                                             \
        }                                                                                            \
    }                                                                                                \
    /* rows i = n * G + g: the per-channel sums ds, db, then grad_input */                           \
    OD_CPU_CLONES static void gn_backward_##SUF(void *ctx, int64_t i0, int64_t i1)                   \
    {                                                                                                \
        const norm_ctx *k = ctx;                                                                     \
        const od_norm_plan *p = k->p;                                                                \
        int64_t G = p->G, D = p->C / p->G, S = p->S, L = D * S;                                      \
        for (int64_t i = i0; i < i1; i++) {                                                          \
            const T *xr = (const T *)k->x + i * L, *gr = (const T *)k->dy + i * L;                   \
            double *ds = k->ds + i * D, *db = k->db + i * D;                                         \
            for (int64_t j = 0; j < D; j++) {                                                        \
                /* eight lanes each (vectorised): one chain of double adds per sum took 2.8 ms       \
                 * for 8x256x56x56, torch 1.3 */                                                     \
                double a8[8] = {0}, b8[8] = {0}, a = 0, b = 0;                                       \
                const T *gs = gr + j * S, *xs = xr + j * S;                                          \
                int64_t s = 0;                                                                       \
                for (; s + 8 <= S; s += 8)                                                           \
                    for (int l = 0; l < 8; l++) {                                                    \
                        a8[l] += (double)gs[s + l] * xs[s + l];                                      \
                        b8[l] += gs[s + l];                                                          \
                    }                                                                                \
                for (; s < S; s++) {                                                                 \
                    a += (double)gs[s] * xs[s];                                                      \
                    b += gs[s];                                                                      \
                }                                                                                    \
                for (int l = 0; l < 8; l++) {                                                        \
                    a += a8[l];                                                                      \
                    b += b8[l];                                                                      \
                }                                                                                    \
                ds[j] = a;                                                                           \
                db[j] = b;                                                                           \
            }                                                                                        \
            if (!k->y)                                                                               \
                continue;                                                                            \
            int64_t g = i % G;                                                                       \
            const T *w = k->w ? (const T *)k->w + g * D : NULL;                                      \
            double dsv = 0, dbv = 0;                                                                 \
            for (int64_t j = 0; j < D; j++) {                                                        \
                dsv += ds[j] * (w ? w[j] : 1);                                                       \
                dbv += db[j] * (w ? w[j] : 1);                                                       \
            }                                                                                        \
            double mean = ((const T *)k->mean)[i], rstd = ((const T *)k->invstd)[i];                 \
            double sc = 1.0 / (double)L;                                                             \
            T c2 = (T)((dbv * mean - dsv) * rstd * rstd * rstd * sc);                                \
            T c3 = (T)(-(double)c2 * mean - dbv * rstd * sc);                                        \
            T *o = (T *)k->y + i * L;                                                                \
            for (int64_t j = 0; j < D; j++) {                                                        \
                T c1 = (T)(rstd * (w ? w[j] : 1));                                                   \
                for (int64_t s = 0; s < S; s++)                                                      \
                    o[j * S + s] = c1 * gr[j * S + s] + c2 * xr[j * S + s] + c3;                     \
            }                                                                                        \
        }                                                                                            \
    }                                                                                                \
    static void gn_param_grads_##SUF(const norm_ctx *k)                                              \
    {                                                                                                \
        const od_norm_plan *p = k->p;                                                                \
        int64_t N = p->N, C = p->C, G = p->G, D = C / G;                                             \
        for (int64_t c = 0; c < C; c++) {                                                            \
            double gw = 0, gb = 0;                                                                   \
            for (int64_t n = 0; n < N; n++) {                                                        \
                int64_t i = n * G + c / D;                                                           \
                double mean = ((const T *)k->mean)[i], rstd = ((const T *)k->invstd)[i];             \
                gw += (k->ds[n * C + c] - k->db[n * C + c] * mean) * rstd;                           \
                gb += k->db[n * C + c];                                                              \
            }                                                                                        \
            if (k->gw)                                                                               \
                ((T *)k->gw)[c] = (T)gw;                                                             \
            if (k->gb)                                                                               \
                ((T *)k->gb)[c] = (T)gb;                                                             \
        }                                                                                            \
    }
GN_FNS(double, f64, fma)
GN_FNS(float, f32, fmaf)

/* ---- the kernel ------------------------------------------------------------------- */

/* A contiguous compute-type copy of t (borrowed; NULL stays NULL). */
static od_status in_compute(const od_tensor *t, od_dtype cdt, od_tensor **out, od_error *err)
{
    *out = NULL;
    return t ? od_cpu_to_dtype((od_tensor *)t, cdt, out, err) : OD_OK;
}

/* A compute-type buffer of n elements for result `like` (sizes [n]). */
static od_status scratch(int64_t n, od_dtype cdt, od_tensor **out, od_error *err)
{
    od_device cpu = {OD_DEV_CPU, 0};
    return od_tensor_empty(&n, 1, cdt, cpu, out, err);
}

static void *data_or_null(od_tensor *t) { return t ? od_tensor_data(t) : NULL; }

/* t.fill_(v), through the dispatcher as factory.c's linspace does */
static od_status fill_(od_tensor *t, double v, od_error *err)
{
    od_value a[2] = {od_tensor_v(t), od_double(v)};
    od_stack fs;
    od_status st = od_call_builtin(OD_OPID_fill__Scalar, a, 2, &fs, err);
    if (!st)
        od_stack_release_rets(&fs);
    return st;
}

od_status od_cpu_norm(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_norm_plan p;
    od_out_spec spec[3];
    int nouts = 0;
    od_status st;
    if ((st = od_shape_norm(id, s, spec, &nouts, err)) || (st = od_norm_plan_of(id, s, &p, err)))
        return st;
    od_dtype cdt = p.input->dtype == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32;
    od_tensor *outs[3] = {NULL, NULL, NULL};
    /* compute-type copies (in) and results (res): x, dy, w, b, rm, rv, mean, invstd */
    od_tensor *in[8] = {NULL}, *res[7] = {NULL};
    double *sums = NULL;
    /* every element of every output is written below (or the output is dropped) */
    if ((st = od_alloc_outputs_overwrite(s, spec, 3, outs, err)))
        return st;
    int64_t numel = od_tensor_numel(p.input), C = p.C;
    const od_tensor *srcs[8] = {p.input, p.grad_out, p.weight, p.bias, p.rmean, p.rvar, p.mean, p.invstd};
    for (int i = 0; i < 8; i++)
        if ((st = in_compute(numel ? srcs[i] : NULL, cdt, &in[i], err)))
            goto done;
    norm_ctx k = {&p, cdt == OD_FLOAT64, p.input->dtype == OD_BFLOAT16,
                  data_or_null(in[0]), data_or_null(in[1]), data_or_null(in[2]), data_or_null(in[3]),
                  data_or_null(in[4]), data_or_null(in[5]), data_or_null(in[6]), data_or_null(in[7]),
                  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                  p.input->dtype == OD_BFLOAT16 && !p.group && !p.backward && spec[1].dtype == OD_BFLOAT16};
    /* res: 0 y / grad_input, 1 save_mean / grad_weight, 2 save_invstd / grad_bias,
     * 3 new running_mean, 4 new running_var */
    bool want[5] = {p.backward ? p.mask[0] : true, p.backward ? p.mask[1] : p.train || p.group,
                    p.backward ? p.mask[2] : p.train || p.group, !p.backward && !p.group && p.train && p.rmean,
                    !p.backward && !p.group && p.train && p.rvar};
    int64_t len[5] = {numel, p.group && !p.backward ? p.N * p.G : C, p.group && !p.backward ? p.N * p.G : C, C, C};
    if (numel == 0) {
        /* Nothing to normalise. Statistics over rows of no element (N > 0) are
         * torch 1.13's 0 / 0, NaN (group norm's mean is 0, its rstd NaN), and
         * batch norm's running mean becomes NaN, its running var
         * (1 - momentum) * var (0 / (n - 1) is -0). Without rows (N == 0)
         * torch 1.13 dies of an integer division by zero; the statistics are
         * 0 here then. Gradients of no element are 0. */
        bool nan_stats = !p.backward && p.N > 0 && (p.group || p.train);
        for (int i = 0; i < 3; i++)
            if (outs[i] && (st = fill_(outs[i], nan_stats && (i == 2 || (i == 1 && !p.group)) ? NAN : 0.0, err)))
                goto done;
        if (nan_stats && !p.group) {
            const od_tensor *run[2] = {p.rmean, p.rvar};
            for (int j = 0; j < 2; j++) {
                if (!run[j])
                    continue;
                if ((st = in_compute(run[j], cdt, &in[4 + j], err)) || (st = scratch(C, cdt, &res[3 + j], err)))
                    goto done;
                for (int64_t c = 0; c < C; c++) {
                    double old = cdt == OD_FLOAT64 ? ((const double *)od_tensor_data(in[4 + j]))[c]
                                                   : ((const float *)od_tensor_data(in[4 + j]))[c];
                    double v = j == 0 ? NAN : p.momentum * (0.0 / -1.0) + (1 - p.momentum) * old;
                    if (cdt == OD_FLOAT64)
                        ((double *)od_tensor_data(res[3 + j]))[c] = v;
                    else
                        ((float *)od_tensor_data(res[3 + j]))[c] = (float)v;
                }
                if ((st = od_cpu_copy_into((od_tensor *)run[j], res[3 + j], err)))
                    goto done;
            }
        }
        goto finish;
    }
    for (int i = 0; i < 5; i++) {
        if (!want[i])
            continue;
        if (i < 3 && outs[i]->dtype == cdt) { /* write the output itself (contiguous, fresh) */
            od_tensor_retain(outs[i]);
            res[i] = outs[i];
        } else if ((st = scratch(len[i], cdt, &res[i], err))) {
            goto done;
        }
    }
    if (p.backward) {
        k.y = data_or_null(res[0]);
        k.gw = data_or_null(res[1]);
        k.gb = data_or_null(res[2]);
    } else {
        k.y = data_or_null(res[0]);
        k.smean = data_or_null(res[1]);
        k.sinvstd = data_or_null(res[2]);
        k.nrm = data_or_null(res[3]);
        k.nrv = data_or_null(res[4]);
    }
    int64_t rows = p.N * p.C, per_c = p.N * p.S + 1;
    if (p.group) {
        int64_t L = p.C / p.G * p.S + 1;
        if (p.backward) {
            if (!(sums = malloc(2 * (size_t)(p.N * p.C) * sizeof *sums))) {
                st = od_error_set(err, OD_ENOMEM, "native_group_norm_backward: out of memory");
                goto done;
            }
            k.ds = sums;
            k.db = sums + p.N * p.C;
            st = od_parallel_for(p.N * p.G, NORM_GRAIN / L + 1, k.f64 ? gn_backward_f64 : gn_backward_f32, &k);
            if (!st && (k.gw || k.gb))
                (k.f64 ? gn_param_grads_f64 : gn_param_grads_f32)(&k);
        } else {
            st = od_parallel_for(p.N * p.G, NORM_GRAIN / L + 1, k.f64 ? gn_forward_f64 : gn_forward_f32, &k);
        }
    } else if (p.backward) {
        st = od_parallel_for(C, NORM_GRAIN / per_c + 1, k.f64 ? bn_backward_f64 : bn_backward_f32, &k);
    } else {
        if (p.train)
            st = od_parallel_for(C, NORM_GRAIN / per_c + 1, k.f64 ? bn_stats_f64 : bn_stats_f32, &k);
        if (!st)
            st = od_parallel_for(rows, NORM_GRAIN / (p.S + 1) + 1, k.f64 ? bn_apply_f64 : bn_apply_f32, &k);
    }
    if (st)
        goto done;
    /* results into the outputs (a view of res as the output's shape) */
    for (int i = 0; i < 3; i++) {
        if (!res[i] || !outs[i] || res[i] == outs[i])
            continue;
        od_tensor *v = NULL;
        if ((st = od_tensor_view(res[i], outs[i]->sizes, outs[i]->ndim, &v, err)))
            goto done;
        st = od_cpu_copy_into(outs[i], v, err);
        od_tensor_release(v);
        if (st)
            goto done;
    }
    /* the running statistics, in place into the caller's tensors */
    if (res[3] && (st = od_cpu_copy_into((od_tensor *)p.rmean, res[3], err)))
        goto done;
    if (res[4] && (st = od_cpu_copy_into((od_tensor *)p.rvar, res[4], err)))
        goto done;
finish:
    for (int i = 0; i < 3; i++) {
        if (p.backward && !p.mask[i]) {
            od_tensor_release(outs[i]);
            outs[i] = NULL;
            s->rets[i] = od_none();
        } else {
            s->rets[i] = od_tensor_v(outs[i]);
            outs[i] = NULL;
        }
    }
    s->nrets = 3;
done:
    free(sums);
    for (int i = 0; i < 8; i++)
        od_tensor_release(in[i]);
    for (int i = 0; i < 7; i++)
        od_tensor_release(res[i]);
    for (int i = 0; i < 3; i++)
        od_tensor_release(outs[i]);
    return st;
}
