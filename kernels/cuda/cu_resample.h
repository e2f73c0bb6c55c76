/* cu_resample.h — interface between the boxed CUDA upsample kernel
 * (resample.c, gcc) and its launcher (resample.cu, nvcc).
 *
 * Invariants: as cu_pool.h — plain C, OD_CU_* dtypes, borrowed device
 * pointers, the launcher only enqueues. x (self or grad_output) and the
 * result are contiguous [planes, D, H, W] (od_resample.h's geometry, checked
 * on the host). Backward accumulates into acc (zeroed scratch of planes x
 * D x H x W floats or doubles) and converts it into out.
 */
#ifndef OD_CU_RESAMPLE_H
#define OD_CU_RESAMPLE_H

#include "cuda_kernels.h"
#include "od_resample.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct od_cu_resample_args {
    od_resample_geom g;
    int32_t dtype, backward, sm_count;
    int64_t planes;
    const void *x;
    void *out;
    void *acc; /* backward only */
} od_cu_resample_args;

static inline int od_cu_resample_acc_size(int32_t dtype) { return dtype == OD_CU_FLOAT64 ? 8 : 4; }
cudaError_t od_cu_resample(const od_cu_resample_args *a, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
