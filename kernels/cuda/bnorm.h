/* bnorm.h — the launcher interface of batch norm and group norm between
 * bnorm.c (gcc) and bnorm.cu (nvcc).
 *
 * Invariants: plain C, extern "C"-safe, no od_tensor.h (as cuda_kernels.h).
 * Every pointer is a borrowed device pointer to a contiguous buffer, valid
 * until the caller synchronises; NULL where the operand is absent. The
 * launcher enqueues only, and fails on nothing but the launch itself.
 */
#ifndef OD_CU_BNORM_H
#define OD_CU_BNORM_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { OD_CU_NORM_BN, OD_CU_NORM_BN_BACKWARD, OD_CU_NORM_GN, OD_CU_NORM_GN_BACKWARD };

typedef struct od_cu_norm_args {
    int kind;                      /* OD_CU_NORM_* */
    int xdt, pdt;                  /* OD_CU_* of input / grad_out / grad_input, and of every
                                    * parameter, statistic and parameter gradient */
    const void *x, *dy;            /* [N, C, S] */
    const void *w, *b;             /* [C] */
    const void *rm, *rv;           /* batch norm: running statistics [C] (read) */
    const void *mean, *invstd;     /* backward: the saved statistics ([C] or [N, G]) */
    void *y;                       /* output or grad_input [N, C, S] */
    void *smean, *sinvstd;         /* forward: the statistics ([C] or [N, G]) */
    void *nrm, *nrv;               /* batch norm training: new running statistics [C] */
    void *gw, *gb;                 /* backward: [C] */
    double *scratch;               /* group norm backward: 2 * N * C doubles */
    int64_t N, C, S, G;
    bool train;
    double momentum, eps;
} od_cu_norm_args;

cudaError_t od_cu_norm(const od_cu_norm_args *a, int sm_count, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
