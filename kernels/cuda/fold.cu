/* fold.cu — max_unpool2d / max_unpool3d's scatter on the device (cu_fold.h).
 *
 * Invariants: one thread per input element in a grid-stride loop with
 * 64-bit indices; max pooling's indices are distinct within a plane, so the
 * writes never collide (duplicates write one of their values, as ATen's CUDA
 * kernel). An index out of range is not written; the flag keeps the last
 * such position (atomicMax), which the host reports as the CPU does.
 */
#include "cu_common.cuh"
#include "cu_fold.h"

namespace {

template <typename T>
__global__ void unpool_kernel(const T *x, const int64_t *ix, T *out, int64_t planes, int64_t in_plane, int64_t out_plane,
                              unsigned long long *flag)
{
    int64_t n = planes * in_plane;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t at = ix[i];
        if (at < 0 || at >= out_plane) {
            atomicMax(flag, (unsigned long long)(i + 1));
            continue;
        }
        out[(i / in_plane) * out_plane + at] = x[i];
    }
}

} // namespace

extern "C" cudaError_t od_cu_max_unpool(bool f64, const void *x, const int64_t *ix, void *out, int64_t planes,
                                        int64_t in_plane, int64_t out_plane, int64_t *flag, int sm_count,
                                        cudaStream_t st)
{
    int64_t n = planes * in_plane;
    if (n <= 0)
        return cudaSuccess;
    unsigned grid = odcu::grid_for(n, 256, sm_count, 8);
    if (f64)
        unpool_kernel<double><<<grid, 256, 0, st>>>((const double *)x, ix, (double *)out, planes, in_plane, out_plane,
                                                    (unsigned long long *)flag);
    else
        unpool_kernel<float><<<grid, 256, 0, st>>>((const float *)x, ix, (float *)out, planes, in_plane, out_plane,
                                                   (unsigned long long *)flag);
    return cudaGetLastError();
}
