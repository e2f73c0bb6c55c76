/* od_resample.h — the source-index arithmetic of upsample_nearest1d/2d/3d
 * and upsample_linear1d / bilinear2d / trilinear3d (forward and backward),
 * shared by the CPU kernels (cpu/resample.c) and the CUDA ones
 * (cuda/resample.cu) so both read the same input elements with the same
 * weights.
 *
 * Invariants: plain C (gcc and nvcc). Every operator is seen as 3 spatial
 * dims (D, H, W); a 1d or 2d one has leading dims of size 1 in and out,
 * no scale, whose index is 0 with weight 1. ATen 1.13's UpSample.h:
 * nearest_idx (float arithmetic, the in == out and 2x shortcuts) and
 * area_pixel_compute_scale / area_pixel_compute_source_index /
 * guard_index_and_lambda in the opmath type (float for float32 and
 * bfloat16, double for float64), the source index computed in double and
 * rounded to it as C++ does (linear's: OD_RESAMPLE_LINEAR_FN). Bicubic
 * (2d only) is the cubic kind: 4 taps per dim, borders clamped. Sizes were validated (>= 1) by
 * od_resample_plan_of (shape_resample.c).
 */
#ifndef OD_RESAMPLE_H
#define OD_RESAMPLE_H

#include <math.h>
#include <stdint.h>

#include "od_half.h"

enum { OD_RESAMPLE_NEAREST = 0, OD_RESAMPLE_LINEAR = 1, OD_RESAMPLE_CUBIC = 2 };

typedef struct od_resample_geom {
    int32_t kind;          /* OD_RESAMPLE_* */
    int32_t align_corners; /* linear, cubic */
    int32_t has_scale[3];  /* the scales_* argument was given */
    double scale[3];
    int64_t in[3], out[3]; /* D, H, W */
} od_resample_geom;

/* nearest backward: the input index output index o of dim d reads
 * (nearest_idx, with its in == out and 2x shortcuts, in float) */
static inline OD_HD int64_t od_resample_nearest(const od_resample_geom *g, int d, int64_t o)
{
    int64_t in = g->in[d], out = g->out[d];
    if (out == in)
        return o;
    if (out == 2 * in)
        return o >> 1;
    float s = g->has_scale[d] && g->scale[d] > 0 ? (float)(1.0 / g->scale[d]) : (float)in / (float)out;
    int64_t i = (int64_t)floorf((float)o * s);
    return i < in - 1 ? i : in - 1;
}

/* nearest forward: the CPU kernel's compute_indices_weights_nearest, no
 * shortcuts, in the opmath type A (floorf as ATen, for double too) */
#define OD_RESAMPLE_NEAREST_FN(NAME, A)                                                                        \
    static inline OD_HD int64_t NAME(const od_resample_geom *g, int d, int64_t o)                             \
    {                                                                                                          \
        int64_t in = g->in[d], out = g->out[d];                                                                \
        A scale = g->has_scale[d] && g->scale[d] > 0 ? (A)(1.0 / g->scale[d]) : (A)in / (A)out;               \
        int64_t i = (int64_t)floorf((float)(scale * (A)o));                                                    \
        return i < in - 1 ? i : in - 1;                                                                        \
    }
OD_RESAMPLE_NEAREST_FN(od_resample_nearest_fwd_f32, float)
OD_RESAMPLE_NEAREST_FN(od_resample_nearest_fwd_f64, double)
#undef OD_RESAMPLE_NEAREST_FN

/* linear: output index o of dim d blends input i0 (weight *l0) and i1 (*l1).
 * S is the opmath type (the scale's and the weights'), A the one the source
 * index is computed in: ATen's acc_type, double for a CPU float32 tensor
 * (its weights keep that index's fraction), S elsewhere (CUDA's float,
 * bfloat16's float). ATen's linear kernels are built per CPU capability
 * (AVX2, AVX-512: with FMA), where the compiler fuses scale * (o + 0.5) -
 * 0.5 into one fma (torch 1.13 measured: a float64 index like (7 + 0.5) /
 * 3 - 0.5 is 1.9999999999999998, not 2); nvcc fuses it the same way. The
 * index is truncated (static_cast<int64_t>, >= 0 here), never floored
 * through a float. */
#define OD_RESAMPLE_LINEAR_FN(NAME, S, A, FMA)                                                             \
    static inline OD_HD void NAME(const od_resample_geom *g, int d, int64_t o, int64_t *i0, int64_t *i1, S *l0, \
                                  S *l1)                                                                    \
    {                                                                                                       \
        int64_t in = g->in[d], out = g->out[d];                                                             \
        if (in == out) { /* ATen's "scale_factor = 1, simply copy", whatever the scales argument says */   \
            *i0 = *i1 = o;                                                                                  \
            *l0 = (S)1;                                                                                     \
            *l1 = (S)0;                                                                                     \
            return;                                                                                         \
        }                                                                                                   \
        S scale;                                                                                            \
        A real;                                                                                             \
        if (g->align_corners)                                                                               \
            scale = out > 1 ? (S)(in - 1) / (S)(out - 1) : (S)0;                                            \
        else                                                                                                \
            scale = g->has_scale[d] && g->scale[d] > 0 ? (S)(1.0 / g->scale[d]) : (S)in / (S)out;          \
        if (g->align_corners) {                                                                             \
            real = (A)scale * (A)o;                                                                         \
        } else {                                                                                            \
            real = FMA((A)scale, (A)o + (A)0.5, (A)-0.5);                                                   \
            if (real < 0)                                                                                   \
                real = 0;                                                                                   \
        }                                                                                                   \
        int64_t i = (int64_t)real;                                                                          \
        if (i > in - 1)                                                                                     \
            i = in - 1;                                                                                     \
        A lam = real - (A)i;                                                                                \
        lam = lam < 0 ? (A)0 : lam > 1 ? (A)1 : lam;                                                        \
        *i0 = i;                                                                                            \
        *i1 = i + (i < in - 1 ? 1 : 0);                                                                     \
        *l1 = (S)lam;                                                                                       \
        *l0 = (S)1 - (S)lam;                                                                                \
    }
OD_RESAMPLE_LINEAR_FN(od_resample_linear_f32, float, float, fmaf)
OD_RESAMPLE_LINEAR_FN(od_resample_linear_f32_acc64, float, double, fma)
OD_RESAMPLE_LINEAR_FN(od_resample_linear_f64, double, double, fma)
#undef OD_RESAMPLE_LINEAR_FN

/* cubic (upsample_bicubic2d): output index o of dim d blends the 4 inputs
 * ix[0..3] (i - 1 .. i + 2 clamped into [0, in - 1], ATen's
 * upsample_get_value_bounded) with Keys' cubic convolution, A = -0.75
 * (get_cubic_upsample_coefficients). The source index is not clamped at 0
 * (area_pixel_compute_source_index with cubic = true) and is computed in
 * A step by step, as that template does (scale * (o + 0.5) - 0.5, each
 * operand cast to A). guard is a later ATen's guard_index_and_lambda
 * (i <= in - 1, t in [0, 1]); 1.13's CPU kernels apply it in neither
 * direction (an explicit scale that reads past the input then matches
 * torch's backward exactly), the CUDA backward still passes it. */
#define OD_RESAMPLE_CUBIC_FN(NAME, A)                                                                      \
    static inline OD_HD void NAME(const od_resample_geom *g, int d, int64_t o, int guard, int64_t *ix, A *w) \
    {                                                                                                       \
        int64_t in = g->in[d], out = g->out[d];                                                             \
        A scale, real;                                                                                      \
        if (g->align_corners)                                                                               \
            scale = out > 1 ? (A)(in - 1) / (A)(out - 1) : (A)0;                                            \
        else                                                                                                \
            scale = g->has_scale[d] && g->scale[d] > 0 ? (A)(1.0 / g->scale[d]) : (A)in / (A)out;          \
        if (g->align_corners)                                                                               \
            real = scale * (A)o;                                                                            \
        else                                                                                                \
            real = scale * ((A)o + (A)0.5) - (A)0.5;                                                         \
        int64_t i = (int64_t)floorf((float)real);                                                           \
        A t;                                                                                                \
        if (guard) {                                                                                        \
            if (i > in - 1)                                                                                 \
                i = in - 1;                                                                                 \
            t = real - (A)i;                                                                                \
            t = t < 0 ? (A)0 : t > 1 ? (A)1 : t;                                                            \
        } else {                                                                                            \
            t = real - (A)i;                                                                                \
        }                                                                                                   \
        const A a = (A)-0.75;                                                                               \
        A x1 = t + (A)1.0, x2 = (A)1.0 - t, x3 = x2 + (A)1.0;                                               \
        w[0] = ((a * x1 - (A)5 * a) * x1 + (A)8 * a) * x1 - (A)4 * a;                                      \
        w[1] = ((a + (A)2) * t - (a + (A)3)) * t * t + (A)1;                                                \
        w[2] = ((a + (A)2) * x2 - (a + (A)3)) * x2 * x2 + (A)1;                                             \
        w[3] = ((a * x3 - (A)5 * a) * x3 + (A)8 * a) * x3 - (A)4 * a;                                      \
        for (int j = 0; j < 4; j++) {                                                                       \
            int64_t k = i - 1 + j;                                                                          \
            ix[j] = k < 0 ? 0 : k > in - 1 ? in - 1 : k;                                                    \
        }                                                                                                   \
    }
OD_RESAMPLE_CUBIC_FN(od_resample_cubic_f32, float)
OD_RESAMPLE_CUBIC_FN(od_resample_cubic_f64, double)
#undef OD_RESAMPLE_CUBIC_FN

#endif
