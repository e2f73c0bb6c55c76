/* range.cu — linspace and logspace on CUDA.
 *
 * Invariants: as cuda_kernels.h states — enqueue only, report launch errors.
 * Each element is computed on its own from ATen 1.13's CUDA formula
 * (RangeFactories.cu): start + step * i for the first half, end - step *
 * (steps - 1 - i) for the second, the power taken after for logspace; the
 * caller has computed step and converted start, end and base as ATen does,
 * so the values do not depend on the launch shape.
 */
#include "ew_impl.cuh"

using namespace odcu;

template <typename C>
__global__ void __launch_bounds__(256) linspace_kernel(char *out, int dt, int64_t n, bool log, C start, C end,
                                                       C step, C base)
{
    const int es = dtype_size(dt);
    const int64_t half = n / 2;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        C e = i < half ? start + step * (C)i : end - step * (C)(n - i - 1);
        store_dyn<C>(out + i * es, dt, log ? (C)pow(base, e) : e);
    }
}

extern "C" cudaError_t od_cu_linspace(void *out, int dt, int64_t n, bool log, bool wide, double start,
                                      double end, double step, double base, int sm_count, cudaStream_t st)
{
    if (n <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(n, 256, sm_count, 8);
    if (wide)
        linspace_kernel<double><<<grid, 256, 0, st>>>((char *)out, dt, n, log, start, end, step, base);
    else
        linspace_kernel<float><<<grid, 256, 0, st>>>((char *)out, dt, n, log, (float)start, (float)end,
                                                     (float)step, (float)base);
    return cudaGetLastError();
}
