/* embedding_bag.cu — the launcher of the CUDA _embedding_bag /
 * _embedding_bag_forward_only forward (embedding_bag.c).
 *
 * Invariants: cpu/embedding_bag.c's arithmetic: one block per bag (grid
 * stride), threads over the feature dim; sums in index order in float for
 * float16 / float32 and double for float64, 'mean' divides once, 'max'
 * keeps the first maximum (strict >); padding_idx takes no part. offset2bag
 * is upper_bound(offsets, i) - 1 per index; a bag's size is its non-padding
 * count ('mean' and 'max'), 0 in 'sum'; max_indices is a copy of bag_size
 * outside 'max'. An out-of-range index is skipped and reported via flag.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cu_common.cuh"
#include "cu_embedding_bag.h"

using namespace odcu;

namespace {

__device__ __forceinline__ int64_t ld_i(const void *p, int32_t dt, int64_t at)
{
    switch (dt) { /* any integer: the forward's inputs may be promoted to int32 / int64 */
    case OD_CU_BOOL:
    case OD_CU_UINT8: return ((const uint8_t *)p)[at];
    case OD_CU_INT8: return ((const int8_t *)p)[at];
    case OD_CU_INT16: return ((const int16_t *)p)[at];
    case OD_CU_INT32: return ((const int32_t *)p)[at];
    default: return ((const int64_t *)p)[at];
    }
}

__device__ __forceinline__ void st_i(void *p, int32_t dt, int64_t at, int64_t v)
{
    if (dt == OD_CU_INT32)
        ((int32_t *)p)[at] = (int32_t)v;
    else
        ((int64_t *)p)[at] = v;
}

__device__ __forceinline__ void report(int64_t *flag, int64_t code, int64_t v)
{
    if (flag && atomicCAS((unsigned long long *)&flag[0], 0ULL, (unsigned long long)code) == 0ULL)
        *(volatile int64_t *)&flag[1] = v;
}

__global__ void __launch_bounds__(256) check_offsets(const od_cu_embag_args a)
{
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < a.no; k += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = ld_i(a.off, a.off_dt, k * a.os0);
        if (k == 0 && o != 0)
            report(a.flag, OD_CU_EMBAG_EFIRST, o);
        if (k == a.no - 1 && o > a.n)
            report(a.flag, OD_CU_EMBAG_ELAST, o);
        if (k > 0 && o < ld_i(a.off, a.off_dt, (k - 1) * a.os0))
            report(a.flag, OD_CU_EMBAG_EORDER, k);
    }
}

__global__ void __launch_bounds__(256) offset2bag(const od_cu_embag_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t lo = 0, hi = a.no; /* first k with offsets[k] > i */
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (ld_i(a.off, a.off_dt, mid * a.os0) <= i)
                lo = mid + 1;
            else
                hi = mid;
        }
        st_i(a.o2b, a.out_idt, i, lo - 1);
    }
}

template <typename C> __global__ void __launch_bounds__(256) bags(const od_cu_embag_args a)
{
    int64_t es = dtype_size(a.wdt);
    for (int64_t b = blockIdx.x; b < a.nbags; b += gridDim.x) {
        int64_t start = ld_i(a.off, a.off_dt, b * a.os0);
        int64_t end = b + 1 < a.no ? ld_i(a.off, a.off_dt, (b + 1) * a.os0) : a.n;
        if (start < 0)
            start = 0;
        if (end > a.n)
            end = a.n;
        for (int64_t d = threadIdx.x; d < a.D; d += blockDim.x) {
            C acc = 0;
            int64_t cnt = 0, arg = 0;
            for (int64_t i = start; i < end; i++) {
                int64_t v = ld_i(a.idx, a.idx_dt, i * a.is0);
                if (v < 0 || v >= a.V) {
                    report(a.flag, OD_CU_EMBAG_EINDEX, v);
                    continue;
                }
                if (v == a.padding_idx)
                    continue;
                C x = load_dyn<C>((const char *)a.w + (v * a.ws0 + d * a.ws1) * es, a.wdt);
                if (a.mode == 2) {
                    if (cnt == 0 || x > acc) {
                        acc = x;
                        arg = v;
                    }
                } else {
                    if (a.has_psw)
                        x *= load_dyn<C>((const char *)a.psw + i * a.ps0 * es, a.wdt);
                    acc += x;
                }
                cnt++;
            }
            if (a.mode == 1 && cnt > 0)
                acc /= (C)cnt;
            store_dyn<C>((char *)a.out + (b * a.D + d) * es, a.wdt, acc);
            if (a.mode == 2)
                st_i(a.maxi, a.out_idt, b * a.D + d, arg);
            if (d == 0 || a.D == 0) {
                int64_t bs = a.mode == 0 ? 0 : cnt;
                st_i(a.bsz, a.out_idt, b, bs);
                if (a.mode != 2)
                    st_i(a.maxi, a.out_idt, b, bs);
            }
        }
        if (a.D == 0 && threadIdx.x == 0) { /* no features: the sizes still count */
            int64_t cnt = 0;
            for (int64_t i = start; i < end; i++) {
                int64_t v = ld_i(a.idx, a.idx_dt, i * a.is0);
                cnt += v != a.padding_idx;
            }
            st_i(a.bsz, a.out_idt, b, a.mode == 0 ? 0 : cnt);
            if (a.mode != 2)
                st_i(a.maxi, a.out_idt, b, a.mode == 0 ? 0 : cnt);
        }
    }
}

} // namespace

extern "C" cudaError_t od_cu_embedding_bag(const od_cu_embag_args *a, cudaStream_t st)
{
    if (a->no > 0)
        check_offsets<<<grid_for(a->no, 256, a->sm_count, 2), 256, 0, st>>>(*a);
    if (a->n > 0)
        offset2bag<<<grid_for(a->n, 256, a->sm_count, 4), 256, 0, st>>>(*a);
    if (a->nbags > 0) {
        int threads = a->D >= 256 ? 256 : a->D > 32 ? (int)((a->D + 31) / 32 * 32) : 32;
        unsigned grid = (unsigned)(a->nbags < 65535 * 16 ? a->nbags : 65535 * 16);
        if (a->wdt == OD_CU_FLOAT64)
            bags<double><<<grid, threads, 0, st>>>(*a);
        else
            bags<float><<<grid, threads, 0, st>>>(*a);
    }
    return cudaGetLastError();
}
