/* index.cu — launchers of gather, scatter (every reduce) and take.
 *
 * Invariants: as cu_index.h. Scatter has two paths:
 *  - per line: one thread per line of the index (its positions with the dim
 *    coordinate left out): the targets of two lines differ in a coordinate
 *    other than dim, so no two threads write one element, and each
 *    element's contributions combine in index order along dim, as on the
 *    CPU (float sums round the same). Values compute in their family
 *    (float for float16/bfloat16/float32, double, int64 wrapping for
 *    integers and bool), stored back after each step. It serves every
 *    reduce and dtype, and calls with lines enough to fill the device.
 *  - parallel (scatter_parallel): one thread per index position, for few
 *    long lines (a 1-D scatter_add is one line): plain scatter with the
 *    CPU's last writer elected first, sum and mean by atomic adds on
 *    float32/float64/int32/int64 (float sums then round in arrival order,
 *    as torch's CUDA kernel's do).
 */
#include "cu_common.cuh"
#include "cu_index.h"

using namespace odcu;

namespace {

enum { R_NONE = 0, R_SUM = 1, R_PROD = 2, R_MEAN = 3, R_AMAX = 4, R_AMIN = 5 }; /* od_scatter_reduce */

template <typename C> __device__ __forceinline__ bool is_nan(C v)
{
    if constexpr (is_int_v<C>)
        return false;
    else
        return v != v;
}

template <typename C> __device__ __forceinline__ C comb(C a, C b, int r)
{
    if constexpr (is_int_v<C>) {
        switch (r) {
        case R_SUM:
        case R_MEAN: return (int64_t)((uint64_t)a + (uint64_t)b);
        case R_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
        case R_AMAX: return a < b ? b : a;
        case R_AMIN: return b < a ? b : a;
        default: return b;
        }
    } else {
        switch (r) {
        case R_SUM:
        case R_MEAN: return a + b;
        case R_PROD: return a * b;
        case R_AMAX: return is_nan(b) ? b : (a < b ? b : a);
        case R_AMIN: return is_nan(b) ? b : (b < a ? b : a);
        default: return b;
        }
    }
}

template <typename C> __device__ __forceinline__ C identity(int r, int dt)
{
    if constexpr (is_int_v<C>) {
        int64_t lo = dt == OD_CU_INT8 ? INT8_MIN : dt == OD_CU_INT16 ? INT16_MIN : dt == OD_CU_INT32 ? INT32_MIN
                     : dt == OD_CU_INT64 ? INT64_MIN : 0;
        int64_t hi = dt == OD_CU_BOOL ? 1 : dt == OD_CU_UINT8 ? UINT8_MAX : dt == OD_CU_INT8 ? INT8_MAX
                     : dt == OD_CU_INT16 ? INT16_MAX : dt == OD_CU_INT32 ? INT32_MAX : INT64_MAX;
        return r == R_PROD ? 1 : r == R_AMAX ? lo : r == R_AMIN ? hi : 0;
    } else {
        return r == R_PROD ? (C)1 : r == R_AMAX ? (C)-INFINITY : r == R_AMIN ? (C)INFINITY : (C)0;
    }
}

/* out / count as ATen's mean: the count cast to the dtype first (0 -> 1),
 * integers divided with floor */
template <typename C> __device__ __forceinline__ C mean_div(C a, int64_t count, int dt)
{
    if constexpr (is_int_v<C>) {
        int64_t c = round_to_dtype<int64_t>(count, dt);
        if (c == 0)
            c = 1;
        if (c == -1)
            return (int64_t)(0 - (uint64_t)a);
        int64_t q = a / c;
        if (a % c != 0 && ((a < 0) != (c < 0)))
            q--;
        return q;
    } else {
        C c = round_to_dtype<C>((C)count, dt);
        return a / (c == (C)0 ? (C)1 : c);
    }
}

__device__ __forceinline__ void offsets(const od_cu_scatter_args &a, int64_t lin, int64_t *io, int64_t *so,
                                        int64_t *ob)
{
    *io = *so = *ob = 0;
    for (int k = a.ndim - 1; k >= 0; k--) {
        int64_t c = lin % a.sizes[k];
        lin /= a.sizes[k];
        *io += c * a.istr[k];
        *so += c * a.sstr[k];
        if (k != a.dim)
            *ob += c * a.ostr[k];
    }
}

__device__ __forceinline__ int64_t clamp_index(int64_t v, int64_t limit)
{
    return v < 0 ? 0 : v >= limit ? (limit > 0 ? limit - 1 : 0) : v;
}

template <typename E> __global__ void __launch_bounds__(256) gather_kernel(const od_cu_scatter_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t io, so, ob;
        offsets(a, i, &io, &so, &ob);
        int64_t j = clamp_index(a.index[io], a.limit);
        ((E *)a.out)[i] = ((const E *)a.src)[ob + j * a.dstride];
    }
}

template <typename C> __global__ void __launch_bounds__(256) scatter_kernel(const od_cu_scatter_args a, int64_t lines,
                                                                           int64_t dlen)
{
    const int es = dtype_size(a.dtype);
    C value;
    if (a.value_is_int)
        value = round_to_dtype<C>((C)a.vi, a.dtype);
    else if constexpr (is_int_v<C>)
        value = round_to_dtype<C>((C)a.vd, a.dtype); /* in range: the host checked it fits */
    else
        value = round_to_dtype<C>((C)a.vd, a.dtype);
    char *out = (char *)a.out;
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < lines; l += (int64_t)gridDim.x * blockDim.x) {
        /* line l's first position: l spread over the dims other than dim */
        int64_t first = 0, rest = l, mul = 1;
        for (int k = a.ndim - 1; k >= 0; k--) {
            if (k == a.dim) {
                mul *= a.sizes[k];
                continue;
            }
            first += (rest % a.sizes[k]) * mul;
            rest /= a.sizes[k];
            mul *= a.sizes[k];
        }
        int64_t step = 1; /* row-major stride of dim among index positions */
        for (int k = a.ndim - 1; k > a.dim; k--)
            step *= a.sizes[k];
        if (!a.include_self) {
            for (int64_t k = 0; k < dlen; k++) {
                int64_t io, so, ob;
                offsets(a, first + k * step, &io, &so, &ob);
                int64_t pos = ob + clamp_index(a.index[io], a.limit) * a.dstride;
                store_dyn<C>(out + pos * es, a.dtype, identity<C>(a.reduce, a.dtype));
            }
        }
        for (int64_t k = 0; k < dlen; k++) {
            int64_t io, so, ob;
            offsets(a, first + k * step, &io, &so, &ob);
            int64_t pos = ob + clamp_index(a.index[io], a.limit) * a.dstride;
            C b = a.src ? load_dyn<C>((const char *)a.src + so * es, a.dtype) : value;
            C cur = load_dyn<C>(out + pos * es, a.dtype);
            store_dyn<C>(out + pos * es, a.dtype, comb<C>(cur, b, a.reduce));
            if (a.reduce == R_MEAN)
                a.count[pos]++;
        }
        if (a.reduce == R_MEAN) {
            for (int64_t k = 0; k < dlen; k++) {
                int64_t io, so, ob;
                offsets(a, first + k * step, &io, &so, &ob);
                int64_t pos = ob + clamp_index(a.index[io], a.limit) * a.dstride;
                if (a.count[pos] == 0)
                    continue; /* divided already */
                C cur = load_dyn<C>(out + pos * es, a.dtype);
                store_dyn<C>(out + pos * es, a.dtype, mean_div<C>(cur, a.count[pos] + (a.include_self ? 1 : 0), a.dtype));
                a.count[pos] = 0;
            }
        }
    }
}

/* The parallel scatter: one thread per index position, for the reductions
 * that atomics serve (none, sum, mean) on the dtypes they serve. "none"
 * stays deterministic: each target's writer is the position furthest along
 * dim (the CPU's last write), elected in win[] (zeroed scratch, k + 1)
 * before anyone writes. Sums are atomic adds, so floats round in arrival
 * order, as in torch's CUDA scatter_add. */
__device__ __forceinline__ int64_t target_of(const od_cu_scatter_args &a, int64_t i, int64_t *so, int64_t *k)
{
    int64_t io, ob, rest = i;
    offsets(a, i, &io, so, &ob);
    for (int d = a.ndim - 1; d > a.dim; d--)
        rest /= a.sizes[d];
    *k = a.ndim > 0 ? rest % a.sizes[a.dim] : 0;
    return ob + clamp_index(a.index[io], a.limit) * a.dstride;
}

template <typename E> __global__ void __launch_bounds__(256) scatter_elect(const od_cu_scatter_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t so, k, pos = target_of(a, i, &so, &k);
        atomicMax((unsigned long long *)&a.count[pos], (unsigned long long)(k + 1));
    }
}

template <typename E> __global__ void __launch_bounds__(256) scatter_write(const od_cu_scatter_args a, E value)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t so, k, pos = target_of(a, i, &so, &k);
        if (a.count[pos] == k + 1)
            ((E *)a.out)[pos] = a.src ? ((const E *)a.src)[so] : value;
    }
}

/* include_self=False: every target starts from the sum's identity (0) */
template <typename C> __global__ void __launch_bounds__(256) scatter_zero(const od_cu_scatter_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t so, k, pos = target_of(a, i, &so, &k);
        ((C *)a.out)[pos] = (C)0;
    }
}

template <typename C> __device__ __forceinline__ void atomic_add(C *p, C v)
{
    if constexpr (sizeof(C) == 8 && std::is_integral_v<C>)
        atomicAdd((unsigned long long *)p, (unsigned long long)v);
    else if constexpr (std::is_integral_v<C>)
        atomicAdd((unsigned int *)p, (unsigned int)v);
    else
        atomicAdd(p, v);
}

template <typename C> __global__ void __launch_bounds__(256) scatter_add_atomic(const od_cu_scatter_args a, C value)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t so, k, pos = target_of(a, i, &so, &k);
        atomic_add<C>((C *)a.out + pos, a.src ? ((const C *)a.src)[so] : value);
        if (a.reduce == R_MEAN)
            atomicAdd((unsigned long long *)&a.count[pos], 1ull);
    }
}

template <typename C> __global__ void __launch_bounds__(256) scatter_mean_div(const od_cu_scatter_args a)
{
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < a.out_numel;
         p += (int64_t)gridDim.x * blockDim.x)
        if (a.count[p] > 0) {
            C *o = (C *)a.out + p;
            if constexpr (std::is_integral_v<C>) /* int32 too: floor division, as the CPU's */
                *o = (C)mean_div<int64_t>((int64_t)*o, a.count[p] + (a.include_self ? 1 : 0), a.dtype);
            else
                *o = mean_div<C>(*o, a.count[p] + (a.include_self ? 1 : 0), a.dtype);
        }
}

template <typename C> static void scatter_sum_parallel(const od_cu_scatter_args *a, C value, cudaStream_t st)
{
    unsigned g = grid_for(a->n, 256, a->sm_count, 8);
    if (!a->include_self)
        scatter_zero<C><<<g, 256, 0, st>>>(*a);
    scatter_add_atomic<C><<<g, 256, 0, st>>>(*a, value);
    if (a->reduce == R_MEAN)
        scatter_mean_div<C><<<grid_for(a->out_numel, 256, a->sm_count, 8), 256, 0, st>>>(*a);
}

template <typename E> static void scatter_none_parallel(const od_cu_scatter_args *a, E value, cudaStream_t st)
{
    unsigned g = grid_for(a->n, 256, a->sm_count, 8);
    scatter_elect<E><<<g, 256, 0, st>>>(*a);
    scatter_write<E><<<g, 256, 0, st>>>(*a, value);
}

/* The value operand as dtype's bytes (family arithmetic, then stored). */
template <typename E> static E value_bits(const od_cu_scatter_args *a)
{
    E r;
    char buf[8] = {0};
    int dt = a->dtype;
    if (dt == OD_CU_FLOAT32)
        *(float *)buf = a->value_is_int ? (float)a->vi : (float)a->vd;
    else if (dt == OD_CU_FLOAT64)
        *(double *)buf = a->value_is_int ? (double)a->vi : a->vd;
    else if (dt == OD_CU_FLOAT16 || dt == OD_CU_BFLOAT16) {
        float f = a->value_is_int ? (float)a->vi : (float)a->vd;
        if (dt == OD_CU_FLOAT16)
            *(__half *)buf = __float2half_rn(f);
        else
            *(__nv_bfloat16 *)buf = __float2bfloat16_rn(f);
    } else if (dt == OD_CU_BOOL) {
        buf[0] = a->value_is_int ? a->vi != 0 : a->vd != 0.0; /* torch's cast: non-zero is true */
    } else {
        int64_t v = a->vi;
        memcpy(buf, &v, 8); /* little-endian: the low bytes are the narrower integer (it fits: checked) */
    }
    memcpy(&r, buf, sizeof r);
    return r;
}

/* Whether the parallel path serves this call; the per-line kernel does the rest
 * (and calls with enough lines to fill the device on their own). */
static bool scatter_parallel(const od_cu_scatter_args *a, int64_t lines)
{
    if (lines >= 65536)
        return false;
    if (a->reduce == R_NONE)
        return true;
    return (a->reduce == R_SUM || a->reduce == R_MEAN) &&
           (a->dtype == OD_CU_FLOAT32 || a->dtype == OD_CU_FLOAT64 || a->dtype == OD_CU_INT32 ||
            a->dtype == OD_CU_INT64);
}

template <typename E> __global__ void __launch_bounds__(256) take_kernel(const od_cu_take_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t lin = a.idx[i] < 0 ? a.idx[i] + a.numel : a.idx[i], off = 0;
        for (int k = a.ndim - 1; k >= 0; k--) {
            off += (lin % a.sizes[k]) * a.strides[k];
            lin /= a.sizes[k];
        }
        ((E *)a.out)[i] = ((const E *)a.self)[off];
    }
}

template <typename E> __global__ void __launch_bounds__(256) masked_fill_kernel(const od_cu_masked_fill_args a)
{
    E v;
    memcpy(&v, &a.value, sizeof v);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t lin = i, off = 0, ooff = 0;
        for (int k = a.ndim - 1; k >= 0; k--) {
            off += (lin % a.sizes[k]) * a.mstr[k];
            ooff += (lin % a.sizes[k]) * a.ostr[k];
            lin /= a.sizes[k];
        }
        uint8_t m = *((const uint8_t *)a.mask + off * a.mask_es);
        if (!a.mask_is_bool && m > 1) {
            if (a.flag)
                *(volatile int64_t *)&a.flag[0] = 1;
            continue;
        }
        if (m)
            ((E *)a.out)[ooff] = v;
    }
}

__device__ __forceinline__ bool nonzero_at(const od_cu_nonzero_args &a, int64_t i, int64_t *coord)
{
    int64_t lin = i, off = 0;
    for (int k = a.ndim - 1; k >= 0; k--) {
        int64_t c = lin % a.sizes[k];
        if (coord)
            coord[k] = c;
        off += c * a.strides[k];
        lin /= a.sizes[k];
    }
    const char *p = (const char *)a.self + off * dtype_size(a.dtype);
    return family_of(a.dtype) == FAM_I64 ? load_dyn<int64_t>(p, a.dtype) != 0 : load_dyn<double>(p, a.dtype) != 0.0;
}

__global__ void __launch_bounds__(256) nonzero_count_kernel(const od_cu_nonzero_args a)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x)
        if (nonzero_at(a, i, nullptr))
            atomicAdd((unsigned long long *)a.count, 1ull);
}

/* one thread: the rows come out in row-major order */
__global__ void nonzero_write_kernel(const od_cu_nonzero_args a)
{
    int64_t coord[OD_CU_MAX_DIMS], r = 0;
    for (int64_t i = 0; i < a.n; i++)
        if (nonzero_at(a, i, coord)) {
            for (int k = 0; k < a.ndim; k++)
                a.out[r * a.ndim + k] = coord[k];
            r++;
        }
}

} // namespace

extern "C" cudaError_t od_cu_masked_fill(const od_cu_masked_fill_args *a, cudaStream_t st)
{
    if (a->n <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(a->n, 256, a->sm_count, 8);
    switch (a->es) {
    case 1: masked_fill_kernel<uint8_t><<<grid, 256, 0, st>>>(*a); break;
    case 2: masked_fill_kernel<uint16_t><<<grid, 256, 0, st>>>(*a); break;
    case 4: masked_fill_kernel<uint32_t><<<grid, 256, 0, st>>>(*a); break;
    case 8: masked_fill_kernel<uint64_t><<<grid, 256, 0, st>>>(*a); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_nonzero_count(const od_cu_nonzero_args *a, cudaStream_t st)
{
    if (a->n <= 0)
        return cudaSuccess;
    nonzero_count_kernel<<<grid_for(a->n, 256, a->sm_count, 8), 256, 0, st>>>(*a);
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_nonzero_write(const od_cu_nonzero_args *a, cudaStream_t st)
{
    if (a->n <= 0)
        return cudaSuccess;
    nonzero_write_kernel<<<1, 1, 0, st>>>(*a);
    return cudaGetLastError();
}

static int64_t scatter_lines(const od_cu_scatter_args *a)
{
    int64_t dlen = a->ndim > 0 ? a->sizes[a->dim] : 1;
    return dlen > 0 ? a->n / dlen : 0;
}

extern "C" bool od_cu_scatter_needs_count(const od_cu_scatter_args *a)
{
    return !a->gather && (a->reduce == R_MEAN || (a->reduce == R_NONE && scatter_parallel(a, scatter_lines(a))));
}

extern "C" cudaError_t od_cu_scatter(const od_cu_scatter_args *a, cudaStream_t st)
{
    if (a->n <= 0)
        return cudaSuccess;
    if (a->gather) {
        unsigned grid = grid_for(a->n, 256, a->sm_count, 8);
        switch (dtype_size(a->dtype)) {
        case 1: gather_kernel<uint8_t><<<grid, 256, 0, st>>>(*a); break;
        case 2: gather_kernel<uint16_t><<<grid, 256, 0, st>>>(*a); break;
        case 4: gather_kernel<uint32_t><<<grid, 256, 0, st>>>(*a); break;
        default: gather_kernel<uint64_t><<<grid, 256, 0, st>>>(*a); break;
        }
        return cudaGetLastError();
    }
    int64_t dlen = a->ndim > 0 ? a->sizes[a->dim] : 1;
    int64_t lines = scatter_lines(a);
    if (scatter_parallel(a, lines)) {
        if (a->reduce == R_NONE) {
            switch (dtype_size(a->dtype)) {
            case 1: scatter_none_parallel<uint8_t>(a, value_bits<uint8_t>(a), st); break;
            case 2: scatter_none_parallel<uint16_t>(a, value_bits<uint16_t>(a), st); break;
            case 4: scatter_none_parallel<uint32_t>(a, value_bits<uint32_t>(a), st); break;
            default: scatter_none_parallel<uint64_t>(a, value_bits<uint64_t>(a), st); break;
            }
        } else {
            switch (a->dtype) {
            case OD_CU_FLOAT32: scatter_sum_parallel<float>(a, value_bits<float>(a), st); break;
            case OD_CU_FLOAT64: scatter_sum_parallel<double>(a, value_bits<double>(a), st); break;
            case OD_CU_INT32: scatter_sum_parallel<int32_t>(a, value_bits<int32_t>(a), st); break;
            default: scatter_sum_parallel<int64_t>(a, value_bits<int64_t>(a), st); break;
            }
        }
        return cudaGetLastError();
    }
    unsigned grid = grid_for(lines, 256, a->sm_count, 8);
    switch (family_of(a->dtype)) {
    case FAM_F32: scatter_kernel<float><<<grid, 256, 0, st>>>(*a, lines, dlen); break;
    case FAM_F64: scatter_kernel<double><<<grid, 256, 0, st>>>(*a, lines, dlen); break;
    default: scatter_kernel<int64_t><<<grid, 256, 0, st>>>(*a, lines, dlen); break;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_take(const od_cu_take_args *a, cudaStream_t st)
{
    if (a->n <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(a->n, 256, a->sm_count, 8);
    switch (a->elem_size) {
    case 1: take_kernel<uint8_t><<<grid, 256, 0, st>>>(*a); break;
    case 2: take_kernel<uint16_t><<<grid, 256, 0, st>>>(*a); break;
    case 4: take_kernel<uint32_t><<<grid, 256, 0, st>>>(*a); break;
    case 8: take_kernel<uint64_t><<<grid, 256, 0, st>>>(*a); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

namespace {
__global__ void __launch_bounds__(256) first_bad_kernel(const int64_t *idx, int64_t n, int64_t lo, int64_t hi,
                                                        unsigned long long *out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        if (idx[i] < lo || idx[i] >= hi)
            atomicMin(out, (unsigned long long)i);
}

__global__ void first_bad_value(const int64_t *idx, int64_t *out)
{
    if (out[0] != -1)
        out[1] = idx[out[0]];
}
} // namespace

extern "C" cudaError_t od_cu_index_first_bad(const int64_t *idx, int64_t n, int64_t lo, int64_t hi, int64_t *out,
                                             int sm_count, cudaStream_t st)
{
    cudaError_t e = cudaMemsetAsync(out, 0xff, 2 * sizeof(int64_t), st); /* -1: none yet (the largest as unsigned) */
    if (e != cudaSuccess || n <= 0)
        return e;
    first_bad_kernel<<<grid_for(n, 256, sm_count, 8), 256, 0, st>>>(idx, n, lo, hi, (unsigned long long *)out);
    first_bad_value<<<1, 1, 0, st>>>(idx, out);
    return cudaGetLastError();
}
