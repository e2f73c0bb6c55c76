/* scan.cu — cumsum, cumprod, logcumsumexp, cummax, cummin, and the per-line
 * sort serving sort, sort.stable, topk and kthvalue.
 *
 * Invariants:
 *  - Inputs are contiguous [outer, size, inner] (the boxed kernels copy and
 *    cast first); outputs are contiguous, of the same layout ([outer, on,
 *    inner] for the sort family).
 *  - One thread per line (outer * inner lines; consecutive threads read
 *    consecutive addresses when inner > 1). Correctness over speed: a line
 *    is scanned in order, so results are deterministic.
 *  - Accumulation follows the CPU kernels (ATen's CPU acc_type), which are
 *    the reference: double for float32 and float64, float for float16 and
 *    bfloat16, int64 for integers (wrapping through uint64_t).
 *  - cummax/cummin and the sort compare keys (double for floats, int64 for
 *    integers and bool: both exact) and copy the chosen element's bytes, so
 *    NaN payloads survive. NaN is the largest key.
 *  - The sort family runs od_sort_algo.h on each line, the CPU kernel's
 *    algorithms, so equal keys come out in the same order on both backends;
 *    each line has 2 * size pairs of scratch (the stable sort's buffer).
 */
#include "cu_common.cuh"
#include "od_sort_algo.h"

using namespace odcu;

namespace {

__device__ __forceinline__ bool is_float_dt(int dt)
{
    return dt == OD_CU_FLOAT16 || dt == OD_CU_BFLOAT16 || dt == OD_CU_FLOAT32 || dt == OD_CU_FLOAT64;
}

__device__ __forceinline__ void copy_elem(char *dst, const char *src, int es)
{
    for (int b = 0; b < es; b++)
        dst[b] = src[b];
}

template <typename A> __device__ __forceinline__ A log_add_exp(A x, A y)
{
    A mn = isnan(y) ? y : (y < x ? y : x);
    A mx = isnan(y) ? y : (x < y ? y : x);
    if (mn != mx || isfinite(mn))
        return log1p(exp(mn - mx)) + mx;
    return x;
}

template <typename A>
__global__ void __launch_bounds__(256) cum_float(const char *x, char *y, int dt, int op, int64_t outer,
                                                 int64_t size, int64_t inner)
{
    const int es = dtype_size(dt);
    const int64_t lines = outer * inner;
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < lines;
         l += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = l / inner, j = l - o * inner, base = o * size * inner + j;
        A acc = op == OD_CU_SCAN_CUMPROD ? (A)1 : op == OD_CU_SCAN_CUMSUM ? (A)0 : -(A)INFINITY;
        for (int64_t k = 0; k < size; k++) {
            const int64_t e = (base + k * inner) * es;
            A v = load_dyn<A>(x + e, dt);
            acc = op == OD_CU_SCAN_CUMPROD ? acc * v : op == OD_CU_SCAN_CUMSUM ? acc + v : log_add_exp(v, acc);
            store_dyn<A>(y + e, dt, acc);
        }
    }
}

__global__ void __launch_bounds__(256) cum_int(const char *x, char *y, int dt, int op, int64_t outer,
                                               int64_t size, int64_t inner)
{
    const int es = dtype_size(dt);
    const int64_t lines = outer * inner;
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < lines;
         l += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = l / inner, j = l - o * inner, base = o * size * inner + j;
        uint64_t acc = op == OD_CU_SCAN_CUMPROD ? 1u : 0u;
        for (int64_t k = 0; k < size; k++) {
            const int64_t e = (base + k * inner) * es;
            uint64_t v = (uint64_t)load_dyn<int64_t>(x + e, dt);
            acc = op == OD_CU_SCAN_CUMPROD ? acc * v : acc + v;
            store_dyn<int64_t>(y + e, dt, (int64_t)acc);
        }
    }
}

__global__ void __launch_bounds__(256) cum_maxmin(const char *x, char *y, int64_t *ix, int dt, int max,
                                                  int64_t outer, int64_t size, int64_t inner)
{
    const int es = dtype_size(dt);
    const bool fl = is_float_dt(dt);
    const int64_t lines = outer * inner;
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < lines;
         l += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = l / inner, j = l - o * inner, base = o * size * inner + j;
        int64_t idx = 0;
        double outd = fl ? load_dyn<double>(x + base * es, dt) : 0.0;
        int64_t outi = fl ? 0 : load_dyn<int64_t>(x + base * es, dt);
        for (int64_t k = 0; k < size; k++) {
            const int64_t p = base + k * inner;
            bool take;
            if (fl) {
                double c = load_dyn<double>(x + p * es, dt);
                take = isnan(c) || (!isnan(outd) && (max ? c >= outd : c <= outd));
                if (take)
                    outd = c;
            } else {
                int64_t c = load_dyn<int64_t>(x + p * es, dt);
                take = max ? c >= outi : c <= outi;
                if (take)
                    outi = c;
            }
            if (take)
                idx = k;
            ix[p] = idx;
            copy_elem(y + p * es, x + (base + idx * inner) * es, es);
        }
    }
}

__global__ void __launch_bounds__(128) sort_lines(const char *x, char *vals, int64_t *ix, int dt, int op,
                                                  int64_t outer, int64_t size, int64_t inner, int64_t k,
                                                  int desc, int sorted, od_sort_elem *scratch)
{
    const int es = dtype_size(dt);
    const bool fl = is_float_dt(dt);
    const int64_t lines = outer * inner;
    const int64_t on = op == OD_SORT_OP_TOPK ? k : op == OD_SORT_OP_KTHVALUE ? 1 : size;
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < lines;
         l += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = l / inner, j = l - o * inner, base = o * size * inner + j;
        od_sort_elem *a = scratch + l * 2 * size;
        for (int64_t q = 0; q < size; q++) {
            const char *p = x + (base + q * inner) * es;
            if (fl)
                a[q].k.d = load_dyn<double>(p, dt);
            else
                a[q].k.i = load_dyn<int64_t>(p, dt);
            a[q].idx = q;
        }
        const int64_t first = od_sort_line(a, a + size, size, op, k, desc, sorted, fl);
        const int64_t obase = o * on * inner + j;
        for (int64_t q = 0; q < on; q++) {
            const int64_t src = a[first + q].idx;
            ix[obase + q * inner] = src;
            copy_elem(vals + (obase + q * inner) * es, x + (base + src * inner) * es, es);
        }
    }
}

} // namespace

extern "C" cudaError_t od_cu_scan(const void *x, void *y, int64_t *ix, int dtype, int op, int64_t outer,
                                  int64_t size, int64_t inner, int sm_count, cudaStream_t st)
{
    const int64_t lines = outer * inner;
    if (lines <= 0 || size <= 0)
        return cudaSuccess;
    const unsigned g = grid_for(lines, 256, sm_count, 8);
    const char *xc = (const char *)x;
    char *yc = (char *)y;
    if (op == OD_CU_SCAN_CUMMAX || op == OD_CU_SCAN_CUMMIN)
        cum_maxmin<<<g, 256, 0, st>>>(xc, yc, ix, dtype, op == OD_CU_SCAN_CUMMAX, outer, size, inner);
    else if (dtype == OD_CU_FLOAT64 || dtype == OD_CU_FLOAT32)
        cum_float<double><<<g, 256, 0, st>>>(xc, yc, dtype, op, outer, size, inner);
    else if (dtype == OD_CU_FLOAT16 || dtype == OD_CU_BFLOAT16)
        cum_float<float><<<g, 256, 0, st>>>(xc, yc, dtype, op, outer, size, inner);
    else if (op == OD_CU_SCAN_LOGCUMSUMEXP)
        return cudaErrorNotSupported;
    else
        cum_int<<<g, 256, 0, st>>>(xc, yc, dtype, op, outer, size, inner);
    return cudaGetLastError();
}

extern "C" size_t od_cu_sort_scratch(int64_t outer, int64_t size, int64_t inner)
{
    if (outer <= 0 || size <= 0 || inner <= 0)
        return 0;
    return (size_t)outer * (size_t)inner * (size_t)size * 2 * sizeof(od_sort_elem);
}

extern "C" cudaError_t od_cu_sort(const void *x, void *vals, int64_t *ix, int dtype, int op, int64_t outer,
                                  int64_t size, int64_t inner, int64_t k, bool descending, bool sorted,
                                  void *scratch, int sm_count, cudaStream_t st)
{
    const int64_t lines = outer * inner;
    if (lines <= 0 || size <= 0)
        return cudaSuccess;
    sort_lines<<<grid_for(lines, 128, sm_count, 8), 128, 0, st>>>((const char *)x, (char *)vals, ix, dtype,
                                                                   op, outer, size, inner, k, descending,
                                                                   sorted, (od_sort_elem *)scratch);
    return cudaGetLastError();
}
