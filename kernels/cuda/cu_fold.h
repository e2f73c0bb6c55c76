/* cu_fold.h — interface between the boxed CUDA kernel of im2col, col2im and
 * max_unpool2d/3d (fold.c, gcc) and max_unpool's launcher (fold.cu, nvcc);
 * im2col / col2im launch conv.cu's column loops (conv_cu.h).
 *
 * Invariants: plain C; pointers are borrowed device addresses of
 * contiguous buffers; the launcher only enqueues. flag (od_cu_flag's word)
 * ends as the largest 1 + position of an index outside [0, out_plane), 0
 * when every index is in range; such an index is not written.
 */
#ifndef OD_CU_FOLD_H
#define OD_CU_FOLD_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out [planes, out_plane] (zeroed) at ix[q, i] = x[q, i], for q < planes,
 * i < in_plane; float (f64 false) or double */
cudaError_t od_cu_max_unpool(bool f64, const void *x, const int64_t *ix, void *out, int64_t planes, int64_t in_plane,
                             int64_t out_plane, int64_t *flag, int sm_count, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
