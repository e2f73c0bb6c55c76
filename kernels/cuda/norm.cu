/* norm.cu — softmax / log_softmax and layer norm over contiguous inputs.
 *
 * Invariants:
 *  - Inputs are contiguous (the boxed kernels copy views first). Softmax
 *    sees [outer, dim, inner]; layer norm [rows, n].
 *  - Row kernels (softmax with inner == 1, layer norm): L lanes per row,
 *    256 / L rows per block. The row is read from device memory once (16-byte
 *    vectors when aligned) into shared memory when it fits, and the later
 *    passes read it from there; otherwise they re-read device memory.
 *    Statistics are all-reduced across the row's lanes (shuffles, plus
 *    shared memory when L > 32), so every lane holds them.
 *  - Column kernel (softmax with inner > 1): one thread per (outer, inner)
 *    column; consecutive threads read consecutive addresses.
 *  - Math in float for float16/bfloat16/float32 inputs, double for float64;
 *    softmax = exp(x - max) / sum, log_softmax = x - max - log(sum), with
 *    the max NaN-propagating (od_math_maximum_*), like the CPU kernels.
 */
#include "cu_common.cuh"

using namespace odcu;

namespace {

constexpr int kSmemCap = 48 * 1024; /* default dynamic shared memory per block */

template <typename C> __device__ __forceinline__ C cmax(C a, C b)
{
    if constexpr (std::is_same<C, double>::value)
        return od_math_maximum_f64(a, b);
    else
        return od_math_maximum_f32(a, b);
}
template <typename C> __device__ __forceinline__ C cexp(C a)
{
    if constexpr (std::is_same<C, double>::value)
        return od_math_exp_f64(a);
    else
        return od_math_exp_f32(a);
}
template <typename C> __device__ __forceinline__ C clog(C a)
{
    if constexpr (std::is_same<C, double>::value)
        return od_math_log_f64(a);
    else
        return od_math_log_f32(a);
}

/* All-reduce v across the L lanes of this row (L a power of two). */
template <typename C, bool MAX> __device__ __forceinline__ C row_allreduce(C v, int L, C *sm)
{
    const int width = L < 32 ? L : 32;
    for (int d = width / 2; d > 0; d >>= 1) {
        C o = shfl_xor_any(v, d, width);
        v = MAX ? cmax(v, o) : v + o;
    }
    if (L > 32) {
        const int wpr = L / 32, w = threadIdx.x >> 5;
        __syncthreads(); /* sm may still be read from the previous call */
        if ((threadIdx.x & 31) == 0)
            sm[threadIdx.y * wpr + w] = v;
        __syncthreads();
        v = sm[threadIdx.y * wpr];
        for (int k = 1; k < wpr; k++)
            v = MAX ? cmax(v, sm[threadIdx.y * wpr + k]) : v + sm[threadIdx.y * wpr + k];
    }
    return v;
}

struct RowParams {
    const char *in;
    char *out;
    int64_t rows, n;
    int32_t cache; /* rows fit in dynamic shared memory */
    int32_t vec;   /* 16-byte aligned rows */
    /* layer norm only */
    const char *w, *b;
    int32_t wdt, stat_dt;
    char *mean, *rstd;
    double eps;
    int32_t log; /* softmax only */
};

/* Pass 0: load the row (caching it), folding with f. */
template <typename S, typename C, typename F>
__device__ __forceinline__ C row_load_fold(const RowParams &p, const S *row, S *cache, C init, F f)
{
    constexpr int V = 16 / sizeof(S) > 8 ? 8 : 16 / sizeof(S);
    const int L = blockDim.x;
    C acc = init;
    int64_t start = 0;
    if (p.vec) {
        const int64_t nv = p.n / V;
#pragma unroll 4
        for (int64_t k = threadIdx.x; k < nv; k += L) {
            Vec<S, V> x = reinterpret_cast<const Vec<S, V> *>(row)[k];
            if (p.cache)
                reinterpret_cast<Vec<S, V> *>(cache)[k] = x;
#pragma unroll
            for (int e = 0; e < V; e++)
                acc = f(acc, to_c<C>(x.v[e]));
        }
        start = nv * V;
    }
    for (int64_t i = start + threadIdx.x; i < p.n; i += L) {
        S x = row[i];
        if (p.cache)
            cache[i] = x;
        acc = f(acc, to_c<C>(x));
    }
    return acc;
}

template <typename S, typename SO, typename C>
__global__ void __launch_bounds__(256) softmax_rows(const RowParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ C red[8];
    const int L = blockDim.x, Y = blockDim.y;
    S *cache = reinterpret_cast<S *>(smem_raw) + (p.cache ? threadIdx.y * p.n : 0);
    for (int64_t rb = (int64_t)blockIdx.x * Y; rb < p.rows; rb += (int64_t)gridDim.x * Y) {
        const int64_t row = rb + threadIdx.y;
        const bool live = row < p.rows;
        const S *in = reinterpret_cast<const S *>(p.in) + (live ? row : 0) * p.n;
        SO *out = reinterpret_cast<SO *>(p.out) + (live ? row : 0) * p.n;
        C m = -(C)INFINITY;
        if (live)
            m = row_load_fold<S, C>(p, in, cache, m, [](C a, C x) { return cmax(a, x); });
        __syncwarp(); /* cache writes visible to the row's other lanes (L > 32: the all-reduce syncs) */
        m = row_allreduce<C, true>(m, L, red);
        C sum = 0;
        if (live) {
            for (int64_t i = threadIdx.x; i < p.n; i += L)
                sum += cexp(to_c<C>(p.cache ? cache[i] : in[i]) - m);
        }
        sum = row_allreduce<C, false>(sum, L, red);
        if (live) {
            const C lse = clog(sum), inv = (C)1 / sum;
            for (int64_t i = threadIdx.x; i < p.n; i += L) {
                C x = to_c<C>(p.cache ? cache[i] : in[i]) - m;
                constexpr int DTO = std::is_same<SO, float>::value    ? OD_CU_FLOAT32
                                    : std::is_same<SO, double>::value ? OD_CU_FLOAT64
                                    : std::is_same<SO, half_t>::value ? OD_CU_FLOAT16
                                                                      : OD_CU_BFLOAT16;
                out[i] = from_c<DTO>(p.log ? x - lse : cexp(x) * inv);
            }
        }
        /* The cache is rewritten for the next row. */
        if (L > 32)
            __syncthreads();
        else
            __syncwarp();
    }
}

template <typename S, typename SO, typename C>
__global__ void __launch_bounds__(256) softmax_cols(const S *in, SO *out, int64_t outer, int64_t dim,
                                                    int64_t inner, int log)
{
    constexpr int DTO = std::is_same<SO, float>::value    ? OD_CU_FLOAT32
                        : std::is_same<SO, double>::value ? OD_CU_FLOAT64
                        : std::is_same<SO, half_t>::value ? OD_CU_FLOAT16
                                                          : OD_CU_BFLOAT16;
    const int64_t cols = outer * inner;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols;
         c += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = c / inner, j = c - o * inner;
        const S *x = in + o * dim * inner + j;
        SO *y = out + o * dim * inner + j;
        C m = -(C)INFINITY;
        for (int64_t k = 0; k < dim; k++)
            m = cmax(m, to_c<C>(x[k * inner]));
        C sum = 0;
        for (int64_t k = 0; k < dim; k++)
            sum += cexp(to_c<C>(x[k * inner]) - m);
        const C lse = clog(sum), inv = (C)1 / sum;
        for (int64_t k = 0; k < dim; k++) {
            C v = to_c<C>(x[k * inner]) - m;
            y[k * inner] = from_c<DTO>(log ? v - lse : cexp(v) * inv);
        }
    }
}

template <typename S, typename C>
__global__ void __launch_bounds__(256) layer_norm_rows(const RowParams p)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ C red[8];
    constexpr int DT = std::is_same<S, float>::value    ? OD_CU_FLOAT32
                       : std::is_same<S, double>::value ? OD_CU_FLOAT64
                       : std::is_same<S, half_t>::value ? OD_CU_FLOAT16
                                                        : OD_CU_BFLOAT16;
    const int L = blockDim.x, Y = blockDim.y;
    S *cache = reinterpret_cast<S *>(smem_raw) + (p.cache ? threadIdx.y * p.n : 0);
    const int wes = dtype_size(p.wdt), ses = dtype_size(p.stat_dt);
    for (int64_t rb = (int64_t)blockIdx.x * Y; rb < p.rows; rb += (int64_t)gridDim.x * Y) {
        const int64_t row = rb + threadIdx.y;
        const bool live = row < p.rows;
        const S *in = reinterpret_cast<const S *>(p.in) + (live ? row : 0) * p.n;
        S *out = reinterpret_cast<S *>(p.out) + (live ? row : 0) * p.n;
        C s = 0;
        if (live)
            s = row_load_fold<S, C>(p, in, cache, s, [](C a, C x) { return a + x; });
        __syncwarp();
        s = row_allreduce<C, false>(s, L, red);
        /* ATen: 0 for an empty row (and rstd NaN); a row holding an infinity
         * has a NaN mean there (Welford's x - mean meets inf - inf unless the
         * infinity comes last), where the plain sum here would give inf */
        const C mean = !p.n ? (C)0 : isinf(s) ? (C)NAN : s / (C)p.n;
        /* Passes 1 and 2 in 16-byte vectors where the rows allow (as pass 0),
         * then the tail; src is the cached row or the input. */
        constexpr int V = 16 / sizeof(S) > 8 ? 8 : 16 / sizeof(S);
        const S *src = p.cache ? cache : in;
        const int64_t vstart = p.vec ? p.n / V * V : 0;
        C q = 0;
        if (live) {
            for (int64_t k = threadIdx.x; k < vstart / V; k += L) {
                Vec<S, V> x = reinterpret_cast<const Vec<S, V> *>(src)[k];
#pragma unroll
                for (int e = 0; e < V; e++) {
                    C d = to_c<C>(x.v[e]) - mean;
                    q += d * d;
                }
            }
            for (int64_t i = vstart + threadIdx.x; i < p.n; i += L) {
                C d = to_c<C>(src[i]) - mean;
                q += d * d;
            }
        }
        q = row_allreduce<C, false>(q, L, red);
        const C var = q / (C)p.n;
        const C rstd = (C)1 / sqrt(var + (C)p.eps);
        if (live) {
            /* weight and bias in the compute type (the common case) read
             * directly; any other dtype through load_dyn */
            const bool wc = p.wdt == (std::is_same<C, double>::value ? OD_CU_FLOAT64 : OD_CU_FLOAT32);
            auto affine = [&](C y, int64_t i) {
                if (p.w)
                    y = y * (wc ? reinterpret_cast<const C *>(p.w)[i] : load_dyn<C>(p.w + i * wes, p.wdt));
                if (p.b)
                    y = y + (wc ? reinterpret_cast<const C *>(p.b)[i] : load_dyn<C>(p.b + i * wes, p.wdt));
                return y;
            };
            for (int64_t k = threadIdx.x; k < vstart / V; k += L) {
                Vec<S, V> x = reinterpret_cast<const Vec<S, V> *>(src)[k], o;
#pragma unroll
                for (int e = 0; e < V; e++)
                    o.v[e] = from_c<DT>(affine((to_c<C>(x.v[e]) - mean) * rstd, k * V + e));
                reinterpret_cast<Vec<S, V> *>(out)[k] = o;
            }
            for (int64_t i = vstart + threadIdx.x; i < p.n; i += L)
                out[i] = from_c<DT>(affine((to_c<C>(src[i]) - mean) * rstd, i));
            if (threadIdx.x == 0) {
                store_dyn<C>(p.mean + row * ses, p.stat_dt, mean);
                store_dyn<C>(p.rstd + row * ses, p.stat_dt, rstd);
            }
        }
        if (L > 32)
            __syncthreads();
        else
            __syncwarp();
    }
}

static int next_pow2(int64_t x)
{
    int p = 1;
    while (p < x && p < (1 << 30))
        p <<= 1;
    return p;
}

/* Lanes per row, vector and cache decisions for rows of n elements of es bytes. */
static void plan_rows(RowParams *p, const void *in, int es, int sm_count, dim3 *grid, dim3 *block,
                      size_t *smem)
{
    const int V = 16 / es > 8 ? 8 : 16 / es;
    p->vec = ((uintptr_t)in & 15u) == 0 && (p->n * es) % 16 == 0;
    int64_t want = (p->n + 4 * V - 1) / (4 * V);
    int L = next_pow2(want < 1 ? 1 : want);
    if (L < 32)
        L = 32; /* a warp per row at least: shuffles need whole warps of live rows */
    if (L > 256)
        L = 256;
    const int Y = 256 / L;
    size_t bytes = (size_t)Y * (size_t)p->n * (size_t)es;
    p->cache = bytes <= (size_t)kSmemCap;
    *smem = p->cache ? bytes : 0;
    int64_t blocks = (p->rows + Y - 1) / Y;
    int64_t cap = (int64_t)sm_count * 32;
    *grid = dim3((unsigned)(blocks < cap ? (blocks < 1 ? 1 : blocks) : cap));
    *block = dim3(L, Y);
}

template <typename S, typename SO, typename C>
static cudaError_t softmax_run(const void *in, void *out, int64_t outer, int64_t dim, int64_t inner,
                               bool log, int sm_count, cudaStream_t st)
{
    if (inner == 1) {
        RowParams p;
        memset(&p, 0, sizeof p);
        p.in = (const char *)in;
        p.out = (char *)out;
        p.rows = outer;
        p.n = dim;
        p.log = log;
        dim3 grid, block;
        size_t smem;
        plan_rows(&p, in, (int)sizeof(S), sm_count, &grid, &block, &smem);
        softmax_rows<S, SO, C><<<grid, block, smem, st>>>(p);
    } else {
        softmax_cols<S, SO, C><<<grid_for(outer * inner, 256, sm_count, 8), 256, 0, st>>>(
            (const S *)in, (SO *)out, outer, dim, inner, log);
    }
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t od_cu_softmax(const void *in, int in_dtype, void *out, int out_dtype,
                                     int64_t outer, int64_t dim, int64_t inner, bool log,
                                     int sm_count, cudaStream_t st)
{
    if (outer <= 0 || dim <= 0 || inner <= 0)
        return cudaSuccess;
    if (in_dtype == out_dtype) {
        switch (in_dtype) {
        case OD_CU_FLOAT32: return softmax_run<float, float, float>(in, out, outer, dim, inner, log, sm_count, st);
        case OD_CU_FLOAT64: return softmax_run<double, double, double>(in, out, outer, dim, inner, log, sm_count, st);
        case OD_CU_FLOAT16: return softmax_run<half_t, half_t, float>(in, out, outer, dim, inner, log, sm_count, st);
        case OD_CU_BFLOAT16: return softmax_run<bf16_t, bf16_t, float>(in, out, outer, dim, inner, log, sm_count, st);
        default: return cudaErrorNotSupported;
        }
    }
    if (in_dtype == OD_CU_FLOAT16 && out_dtype == OD_CU_FLOAT32)
        return softmax_run<half_t, float, float>(in, out, outer, dim, inner, log, sm_count, st);
    return cudaErrorNotSupported;
}

extern "C" cudaError_t od_cu_layer_norm(const void *in, int dt, const void *weight, const void *bias,
                                        int wdt, void *out, void *mean, void *rstd, int stat_dtype,
                                        int64_t rows, int64_t n, double eps, int sm_count,
                                        cudaStream_t st)
{
    if (rows <= 0)
        return cudaSuccess;
    RowParams p;
    memset(&p, 0, sizeof p);
    p.in = (const char *)in;
    p.out = (char *)out;
    p.rows = rows;
    p.n = n;
    p.w = (const char *)weight;
    p.b = (const char *)bias;
    p.wdt = wdt;
    p.stat_dt = stat_dtype;
    p.mean = (char *)mean;
    p.rstd = (char *)rstd;
    p.eps = eps;
    dim3 grid, block;
    size_t smem;
    if (dt != OD_CU_FLOAT32 && dt != OD_CU_FLOAT64 && dt != OD_CU_FLOAT16 && dt != OD_CU_BFLOAT16)
        return cudaErrorNotSupported;
    plan_rows(&p, in, dtype_size(dt), sm_count, &grid, &block, &smem);
    p.vec = p.vec && ((uintptr_t)out & 15u) == 0; /* the output is written in vectors too */
    switch (dt) {
    case OD_CU_FLOAT32: layer_norm_rows<float, float><<<grid, block, smem, st>>>(p); break;
    case OD_CU_FLOAT64: layer_norm_rows<double, double><<<grid, block, smem, st>>>(p); break;
    case OD_CU_FLOAT16: layer_norm_rows<half_t, float><<<grid, block, smem, st>>>(p); break;
    case OD_CU_BFLOAT16: layer_norm_rows<bf16_t, float><<<grid, block, smem, st>>>(p); break;
    default: return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}
