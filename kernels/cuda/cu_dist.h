/* cu_dist.h — interface between the boxed CUDA kernel of the distances
 * (dist.c, gcc) and their launcher (dist.cu, nvcc).
 *
 * Invariants: plain C; pointers are borrowed device addresses of
 * contiguous float (f64 false) or double buffers; the launcher only
 * enqueues. Layouts as od_dist_plan's (shape_dist.c): cdist x1 [B, r1, m],
 * x2 [B, r2, m], grad / dist [B, r1, r2]; pdist x [n, m] (n = r1), grad /
 * dist [n(n-1)/2]. out is the op's result, written whole.
 */
#ifndef OD_CU_DIST_H
#define OD_CU_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct od_cu_dist_args {
    int32_t op;   /* OD_DISTOP_* (od_shape.h) */
    int32_t kind; /* OD_DIST_P* (od_dist.h) */
    bool f64;
    double p;
    int64_t B, r1, r2, m, combs;
    const void *x1, *x2, *grad, *dist;
    void *out;
    int32_t sm_count;
} od_cu_dist_args;

cudaError_t od_cu_dist(const od_cu_dist_args *a, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
