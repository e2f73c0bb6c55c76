/* od_dist.h — the per-element math of the p-norm distances (_cdist_forward,
 * _pdist_forward and their _backward), shared by the CPU kernels
 * (cpu/dist.c) and the CUDA ones (cuda/dist.cu) so both compute ATen's
 * formulas (DistanceOpsKernel.cpp) in the same order.
 *
 * Invariants: plain C, no tensors: compiles under gcc and nvcc. A distance
 * is finish(red(... red(0, map(|a0 - b0|)) ..., map(|am - bm|))) with the
 * kind's map / red / finish, accumulated in the storage type (float or
 * double) as ATen's scalar loop. The backward term of one difference is
 * ATen's F::backward with its operation order; a zero distance gives 0.
 */
#ifndef OD_DIST_H
#define OD_DIST_H

#include <math.h>

#include "od_half.h"

/* the four native operators (od_dist_plan's op, shape_dist.c) */
enum { OD_DISTOP_CDIST, OD_DISTOP_CDIST_BW, OD_DISTOP_PDIST, OD_DISTOP_PDIST_BW };

/* ATen's dispatch on p: 0, 1, 2, inf, else general (backward: below 2 apart).
 * PINF_NAN is pdist's forward at p = inf: ATen runs it on vectors, whose max
 * keeps a NaN, where cdist's scalar std::max(agg, up) drops a NaN up. */
enum { OD_DIST_P0 = 0, OD_DIST_P1 = 1, OD_DIST_P2 = 2, OD_DIST_PINF = 3, OD_DIST_PGEN = 4, OD_DIST_PINF_NAN = 5 };

/* op: OD_DISTOP_* */
static inline OD_HD int od_dist_kind(int op, double p)
{
    return p == 0 ? OD_DIST_P0 : p == 1 ? OD_DIST_P1 : p == 2 ? OD_DIST_P2
           : isinf(p) ? (op == OD_DISTOP_PDIST ? OD_DIST_PINF_NAN : OD_DIST_PINF) : OD_DIST_PGEN;
}

#define OD_DIST_MATH_(T, SFX, ABS, POW, SQRT)                                                                    \
    static inline OD_HD T od_dist_map_##SFX(int kind, T diff, T p)                                              \
    {                                                                                                           \
        T a = ABS(diff);                                                                                        \
        switch (kind) {                                                                                         \
        case OD_DIST_P0: return a != a ? a : a != (T)0 ? (T)1 : (T)0; /* min(ceil(|d|), 1) */                                \
        case OD_DIST_P1:                                                                                        \
        case OD_DIST_PINF:                                                                                      \
        case OD_DIST_PINF_NAN: return a;                                                                        \
        case OD_DIST_P2: return a * a;                                                                          \
        default: return POW(a, p);                                                                              \
        }                                                                                                       \
    }                                                                                                           \
    static inline OD_HD T od_dist_red_##SFX(int kind, T agg, T up)                                              \
    {                                                                                                           \
        if (kind == OD_DIST_PINF)                                                                               \
            return agg < up ? up : agg; /* std::max(agg, up): a NaN up is dropped */ \
        if (kind == OD_DIST_PINF_NAN)                                                                           \
            return agg < up || up != up ? up : agg; /* vec::maximum: a NaN wins */                             \
        return agg + up;                                                                                        \
    }                                                                                                           \
    static inline OD_HD T od_dist_finish_##SFX(int kind, T agg, T p)                                            \
    {                                                                                                           \
        if (kind == OD_DIST_P2)                                                                                 \
            return SQRT(agg);                                                                                   \
        if (kind == OD_DIST_PGEN)                                                                               \
            return (T)pow((double)agg, 1.0 / (double)p);                                                        \
        return agg;                                                                                             \
    }                                                                                                           \
    /* the gradient term of one difference (ATen's F::backward); kind P0 never gets here */                    \
    static inline OD_HD T od_dist_bw_##SFX(int kind, T diff, T grad, T dist, T p)                               \
    {                                                                                                           \
        T sgn = (T)((diff > (T)0) - (diff < (T)0));                                                             \
        switch (kind) {                                                                                         \
        case OD_DIST_P1: return grad * sgn;                                                                     \
        case OD_DIST_P2: return dist == (T)0 ? (T)0 : grad * diff / dist;                                       \
        case OD_DIST_PINF: return ABS(diff) == dist ? grad * sgn : (T)0 * grad * sgn;                          \
        default:                                                                                                \
            if (p < (T)2)                                                                                       \
                return dist == (T)0 || (diff == (T)0 && p < (T)1)                                               \
                           ? (T)0                                                                               \
                           : sgn * POW(ABS(diff), p - (T)1) * grad / POW(dist, p - (T)1);                       \
            return dist == (T)0 ? (T)0 : diff * POW(ABS(diff), p - (T)2) * grad / POW(dist, p - (T)1);          \
        }                                                                                                       \
    }

OD_DIST_MATH_(float, f32, fabsf, powf, sqrtf)
OD_DIST_MATH_(double, f64, fabs, pow, sqrt)
#undef OD_DIST_MATH_

#endif
