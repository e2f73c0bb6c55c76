/* od_pool.h — the window arithmetic of the pooling operators (max, avg,
 * adaptive avg, adaptive max; 2d and 3d, forward and backward), shared by
 * the CPU kernels (cpu/pool.c) and the CUDA ones (cuda/pool.cu) so both
 * visit the same input elements in the same order.
 *
 * Invariants: plain C, no tensors: compiles under gcc and nvcc. Every
 * operator is seen as 3 spatial dims (T, H, W); a 2d pool has T of size 1
 * with kernel 1, stride 1, no padding, dilation 1, so one loop nest serves
 * both. A flat index (the max pools' `indices`) is (t * H + h) * W + w
 * within one plane, as ATen stores it. The geometry was validated by
 * od_pool_plan_of (shape_pool.c): strides and dilations are positive, and
 * windows of max pools are never empty.
 */
#ifndef OD_POOL_H
#define OD_POOL_H

#include <stdint.h>

#include "od_half.h"

enum { OD_POOL_MAX = 0, OD_POOL_AVG = 1, OD_POOL_AAVG = 2, OD_POOL_AMAX = 3 };

typedef struct od_pool_geom {
    int32_t kind;              /* OD_POOL_* */
    int32_t count_include_pad; /* avg */
    int64_t divisor;           /* avg: divisor_override, 0 for none */
    int64_t in[3], out[3];     /* T, H, W */
    int64_t k[3], st[3], pad[3], dil[3];
} od_pool_geom;

/* The input positions output index o of dim d reads: lo, lo + step, ... < hi
 * (lo >= hi: none); *span is the padded window's length (avg's
 * count_include_pad divisor factor). ATen's loops: DilatedMaxPool /
 * AvgPoolKernel / AdaptivePoolKernel (start_index / end_index). */
static inline OD_HD void od_pool_window(const od_pool_geom *g, int d, int64_t o, int64_t *lo, int64_t *hi,
                                        int64_t *step, int64_t *span)
{
    int64_t in = g->in[d];
    if (g->kind == OD_POOL_AAVG || g->kind == OD_POOL_AMAX) {
        int64_t out = g->out[d];
        *lo = (o * in) / out;
        *hi = ((o + 1) * in + out - 1) / out;
        *step = 1;
        *span = *hi - *lo;
        return;
    }
    int64_t start = o * g->st[d] - g->pad[d];
    if (g->kind == OD_POOL_AVG) {
        int64_t end = start + g->k[d];
        if (end > in + g->pad[d])
            end = in + g->pad[d];
        *span = end - start;
        *lo = start < 0 ? 0 : start;
        *hi = end > in ? in : end;
        *step = 1;
        return;
    }
    int64_t dil = g->dil[d], end = start + (g->k[d] - 1) * dil + 1;
    while (start < 0)
        start += dil;
    *lo = start;
    *hi = end > in ? in : end;
    *step = dil;
    *span = 0;
}

/* avg: the divisor of one output element from its three windows' spans and
 * clipped lengths (divisor_override, else count_include_pad's padded size,
 * else the elements inside). */
static inline OD_HD int64_t od_pool_avg_divisor(const od_pool_geom *g, const int64_t *span, const int64_t *len)
{
    if (g->divisor)
        return g->divisor;
    if (g->count_include_pad)
        return span[0] * span[1] * span[2];
    return len[0] * len[1] * len[2];
}

#endif
