/* search.cu — the launchers of searchsorted and bucketize, and of
 * reflection / replication padding (search.c).
 *
 * Invariants: one thread per input value, a binary search of its row as
 * ATen's cus_lower_bound / cus_upper_bound (NaNs sort last). Values arrive
 * in the common dtype; floating ones compare as doubles (exact for every
 * floating dtype), integers as int64. Sorter values were checked on the host.
 * Padding: one thread per output element, a copy of element bytes.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cu_common.cuh"
#include "cu_index.h"

using namespace odcu;

namespace {

__device__ __forceinline__ double ld_f(const void *p, int64_t i, int32_t dt)
{
    switch (dt) {
    case OD_CU_FLOAT64: return ((const double *)p)[i];
    case OD_CU_FLOAT32: return ((const float *)p)[i];
    case OD_CU_FLOAT16: return h2f(((const uint16_t *)p)[i]);
    default: return bf2f(((const uint16_t *)p)[i]);
    }
}

__device__ __forceinline__ int64_t ld_i(const void *p, int64_t i, int32_t dt)
{
    switch (dt) {
    case OD_CU_INT64: return ((const int64_t *)p)[i];
    case OD_CU_INT32: return ((const int32_t *)p)[i];
    case OD_CU_INT16: return ((const int16_t *)p)[i];
    case OD_CU_INT8: return ((const int8_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

template <bool FLT> __global__ void __launch_bounds__(256) search_kernel(const od_cu_search_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = a.one_row ? 0 : i / a.inner, lo = 0, hi = a.len;
        double xf = 0;
        int64_t xi = 0;
        if (FLT)
            xf = a.in ? ld_f(a.in, i, a.dtype) : a.xd;
        else
            xi = a.in ? ld_i(a.in, i, a.dtype) : a.xi;
        while (lo < hi) {
            int64_t mid = lo + ((hi - lo) >> 1);
            int64_t pos = row * a.len + (a.sorter ? a.sorter[row * a.len + mid] : mid);
            bool go_right;
            if (FLT) {
                double m = ld_f(a.bd, pos, a.dtype);
                go_right = a.right ? !(m > xf) : !(m >= xf);
            } else {
                int64_t m = ld_i(a.bd, pos, a.dtype);
                go_right = a.right ? !(m > xi) : !(m >= xi);
            }
            if (go_right)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (a.out_int32)
            ((int32_t *)a.out)[i] = (int32_t)lo;
        else
            ((int64_t *)a.out)[i] = lo;
    }
}

/* od_pad_source_index (shape_pad.c), for the device */
__device__ __forceinline__ int64_t pad_source(bool reflect, int64_t j, int64_t in, int64_t pad_l)
{
    int64_t i_start = pad_l < 0 ? -pad_l : 0, o_start = pad_l > 0 ? pad_l : 0, ip;
    if (j < pad_l)
        ip = reflect ? 2 * pad_l - j : pad_l;
    else if (j < in + pad_l)
        ip = j;
    else
        ip = reflect ? 2 * (in + pad_l - 1) - j : in + pad_l - 1;
    return ip - o_start + i_start;
}

template <typename E> __global__ void __launch_bounds__(256) pad_kernel(const od_cu_pad_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rem = i, off = 0;
        for (int k = a.ndim - 1; k >= 0; k--) {
            int64_t c = rem % a.sizes[k];
            rem /= a.sizes[k];
            if (k >= a.lead)
                c = pad_source(a.reflect, c, a.in[k - a.lead], a.pad_l[k - a.lead]);
            off += c * a.strides[k];
        }
        ((E *)a.out)[i] = ((const E *)a.self)[off];
    }
}

} // namespace

extern "C" cudaError_t od_cu_pad(const od_cu_pad_args *a, cudaStream_t st)
{
    if (a->n <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(a->n, 256, a->sm_count, 8);
    switch (a->elem_size) {
    case 2: pad_kernel<uint16_t><<<grid, 256, 0, st>>>(*a); break;
    case 4: pad_kernel<uint32_t><<<grid, 256, 0, st>>>(*a); break;
    case 8: pad_kernel<uint64_t><<<grid, 256, 0, st>>>(*a); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_search(const od_cu_search_args *a, cudaStream_t st)
{
    if (a->n <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(a->n, 256, a->sm_count, 8);
    bool flt = a->dtype == OD_CU_FLOAT16 || a->dtype == OD_CU_BFLOAT16 || a->dtype == OD_CU_FLOAT32 ||
               a->dtype == OD_CU_FLOAT64;
    if (flt)
        search_kernel<true><<<grid, 256, 0, st>>>(*a);
    else
        search_kernel<false><<<grid, 256, 0, st>>>(*a);
    return cudaGetLastError();
}
