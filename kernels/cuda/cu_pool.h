/* cu_pool.h — interface between the boxed CUDA pooling kernel (pool.c,
 * gcc) and its launcher (pool.cu, nvcc).
 *
 * Invariants: as cuda_kernels.h — plain C, dtypes as OD_CU_* codes,
 * pointers borrowed device addresses, the launcher only enqueues. Every
 * tensor is contiguous, viewed as [planes, T, H, W] (od_pool.h's geometry,
 * checked on the host by od_pool_plan_of). Backward accumulates into acc
 * (zeroed scratch of planes x T x H x W elements in the compute family:
 * float for float16/bfloat16/float32, double, int64) and then converts into
 * out, so one atomic add serves every dtype.
 */
#ifndef OD_CU_POOL_H
#define OD_CU_POOL_H

#include "cuda_kernels.h"
#include "od_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct od_cu_pool_args {
    od_pool_geom g;
    int32_t dtype;    /* of self, the output and grad_output */
    int32_t backward;
    int32_t sm_count;
    int64_t planes;
    const void *x;    /* forward: self */
    const void *go;   /* backward: grad_output */
    const int64_t *ix; /* backward of max pools: indices; else NULL */
    void *out;        /* forward: the result; backward: grad_input */
    int64_t *out_ix;  /* forward of max pools: indices; else NULL */
    void *acc;        /* backward: zeroed scratch, see above */
} od_cu_pool_args;

/* The scratch element size backward needs for dtype (4 or 8). */
static inline int od_cu_pool_acc_size(int32_t dtype)
{
    return dtype == OD_CU_FLOAT64 || dtype == OD_CU_INT64 ? 8 : 4;
}
cudaError_t od_cu_pool(const od_cu_pool_args *a, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
