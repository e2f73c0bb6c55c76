/* cu_attention.h — interface between the boxed CUDA attention kernel
 * (attention.c, gcc) and its device launcher (attention.cu, nvcc).
 *
 * Invariants: plain C, free of od_tensor.h (see cuda_kernels.h); the host
 * side fills it from an od_sdpa_plan (kernels/od_shape.h) whose operands are
 * float32 or float64 device tensors and whose mask is bool or of query's
 * dtype. Strides are in elements; pointers are borrowed device pointers that
 * stay valid until the caller has synchronized the stream.
 */
#ifndef OD_CU_ATTENTION_H
#define OD_CU_ATTENTION_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OD_CU_SDPA_MAX_DIMS 16 /* OD_MAX_DIMS; attention.c checks it */

typedef struct od_cu_sdpa_args {
    const void *q, *k, *v, *mask; /* element [0, ...] of each; mask NULL when absent */
    void *out, *w;                /* contiguous [nbatch, L, Ev] / [nbatch, L, S]; w NULL when not wanted */
    int f64;                      /* float64 operands (else float32) */
    int mask_bool;                /* mask is bool (else query's dtype, added) */
    int causal;
    int nb;                       /* batch dims */
    int64_t bsizes[OD_CU_SDPA_MAX_DIMS], qb[OD_CU_SDPA_MAX_DIMS], kb[OD_CU_SDPA_MAX_DIMS],
        vb[OD_CU_SDPA_MAX_DIMS], mb[OD_CU_SDPA_MAX_DIMS];
    int64_t nbatch, L, S, E, Ev;
    int64_t qr, qc, kr, kc, vr, vc, mr, mc;
    double scale;
} od_cu_sdpa_args;

/* Dynamic shared memory the launcher needs per block for a (bytes). */
size_t od_cu_sdpa_smem(const od_cu_sdpa_args *a);
/* Enqueues the fused forward (a borrowed for the call). */
cudaError_t od_cu_sdpa(const od_cu_sdpa_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
