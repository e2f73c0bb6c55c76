/* conv_cu.h — the launchers of conv.cu (convolution's device loops), callable
 * from C (conv.c) and defined in CUDA C++.
 *
 * Invariants: plain C types only (no od_tensor), so the device side needs
 * nothing else of the project. Geometry as od_conv_plan's (shape_conv.c):
 * 3 spatial dims, image side (the window slides over it) and grid side
 * (one position per window); buffers contiguous, float (f64 false) or
 * double, on the stream's device. Launchers enqueue only and return the
 * launch error.
 */
#ifndef OD_CONV_CU_H
#define OD_CONV_CU_H

#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct od_cu_conv_geo {
    int64_t c;                     /* image channels of one group */
    int64_t img[3], grid[3], k[3], s[3], p[3], d[3];
    int64_t kvol, limg, lgrid;     /* products of k, img, grid */
} od_cu_conv_geo;

/* col [c * kvol, lgrid] = the columns of im [c, img...] (borrowed) */
cudaError_t od_cu_im2col(const od_cu_conv_geo *g, bool f64, const void *im, void *col, int sm_count,
                         cudaStream_t st);
/* im [c, img...] += the sum of col [c * kvol, lgrid]'s entries over each element's windows */
cudaError_t od_cu_col2im(const od_cu_conv_geo *g, bool f64, const void *col, void *im, int sm_count,
                         cudaStream_t st);
/* out [n, c, l] = bias[c] (bias NULL: 0) */
cudaError_t od_cu_conv_bias_fill(bool f64, void *out, const void *bias, int64_t n, int64_t c, int64_t l,
                                 int sm_count, cudaStream_t st);
/* out [n, c, l] += bias[c] */
cudaError_t od_cu_conv_bias_add(bool f64, void *out, const void *bias, int64_t n, int64_t c, int64_t l, int sm_count,
                                cudaStream_t st);
/* gb[c] = sum of grad [n, c, l] over n and l */
cudaError_t od_cu_conv_bias_grad(bool f64, const void *grad, void *gb, int64_t n, int64_t c, int64_t l,
                                 cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
