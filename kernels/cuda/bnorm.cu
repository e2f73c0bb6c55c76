/* bnorm.cu — batch norm and group norm, forward and backward, on contiguous
 * [N, C, S] operands (the boxed kernels in bnorm.c make them so).
 *
 * Invariants:
 *  - The same math as the CPU kernels (kernels/cpu/norm.c), step for step:
 *    batch norm's two passes per channel with double sums and the mean
 *    rounded to the compute type; group norm's rows of D * S values (its
 *    moments are two passes in double here where the CPU replays ATen's
 *    Welford lanes, so they agree to rounding).
 *  - One block per channel (batch norm) or per (n, group) row (group norm);
 *    block sums are warp shuffles plus shared memory, in double. Elementwise
 *    passes are grid-stride loops.
 *  - Compute in float for float32/bfloat16 (float16 never gets here: the
 *    shape function refuses it as torch's CPU does), double for float64;
 *    loads and stores convert by dtype code (load_dyn / store_dyn).
 */
#include "bnorm.h"
#include "cu_common.cuh"

using namespace odcu;

namespace {

constexpr int kThreads = 256;

/* The sum of v over the block (every thread gets it); sm: 32 doubles. */
__device__ double block_sum(double v, double *sm)
{
    for (int d = 16; d > 0; d >>= 1)
        v += shfl_down_any(v, d);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads(); /* sm may still be read from the previous call */
    if (lane == 0)
        sm[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < (int)(blockDim.x >> 5) ? sm[lane] : 0.0;
        for (int d = 16; d > 0; d >>= 1)
            v += shfl_down_any(v, d);
        if (lane == 0)
            sm[0] = v;
    }
    __syncthreads();
    return sm[0];
}

template <typename C> __device__ __forceinline__ C ld(const void *p, int dt, int64_t i)
{
    return load_dyn<C>((const char *)p + i * dtype_size(dt), dt);
}
template <typename C> __device__ __forceinline__ void st(void *p, int dt, int64_t i, C v)
{
    store_dyn<C>((char *)p + i * dtype_size(dt), dt, v);
}

template <typename C> __device__ __forceinline__ C as_input_type(C v, int dt)
{
    return dt == OD_CU_BFLOAT16 ? (C)bf2f(f2bf((float)v)) : v;
}

/* batch norm: one block per channel c */
template <typename C> __global__ void __launch_bounds__(kThreads) bn_stats(const od_cu_norm_args a)
{
    __shared__ double sm[32];
    const int64_t c = blockIdx.x, M = a.N * a.S;
    double s = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x)
        s += (double)ld<C>(a.x, a.xdt, ((i / a.S) * a.C + c) * a.S + i % a.S);
    s = block_sum(s, sm);
    const C mean = as_input_type((C)(s / (double)M), a.xdt);
    double v = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        C d = ld<C>(a.x, a.xdt, ((i / a.S) * a.C + c) * a.S + i % a.S) - mean;
        v += (double)(d * d);
    }
    v = block_sum(v, sm);
    if (threadIdx.x == 0) {
        const C var_sum = (C)v;
        st<C>(a.smean, a.pdt, c, mean);
        const double vn = (double)var_sum / (double)M; /* ATen's InvStd: 0 for a zero var and eps */
        st<C>(a.sinvstd, a.pdt, c, vn != 0 || a.eps != 0 ? (C)(1.0 / sqrt(vn + a.eps)) : (C)0);
        if (a.nrm)
            st<C>(a.nrm, a.pdt, c, (C)(a.momentum * (double)mean + (1 - a.momentum) * (double)ld<C>(a.rm, a.pdt, c)));
        if (a.nrv)
            st<C>(a.nrv, a.pdt, c,
                  (C)(a.momentum * ((double)var_sum / (double)(M - 1)) + (1 - a.momentum) * (double)ld<C>(a.rv, a.pdt, c)));
    }
}

template <typename C> __global__ void __launch_bounds__(kThreads) bn_apply(const od_cu_norm_args a)
{
    const int64_t n = a.N * a.C * a.S;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t c = (i / a.S) % a.C;
        const C mean = ld<C>(a.train ? a.smean : a.rm, a.pdt, c);
        const C invstd = a.train ? ld<C>(a.sinvstd, a.pdt, c)
                                 : (C)1 / (C)sqrt((double)(ld<C>(a.rv, a.pdt, c) + (C)a.eps));
        const C alpha = invstd * (a.w ? ld<C>(a.w, a.pdt, c) : (C)1);
        const C beta = (a.b ? ld<C>(a.b, a.pdt, c) : (C)0) - mean * alpha;
        st<C>(a.y, a.xdt, i, fma(ld<C>(a.x, a.xdt, i), alpha, beta)); /* as the CPU kernel */
    }
}

template <typename C> __global__ void __launch_bounds__(kThreads) bn_backward(const od_cu_norm_args a)
{
    __shared__ double sm[32];
    const int64_t c = blockIdx.x, M = a.N * a.S;
    const C mean = ld<C>(a.train ? a.mean : a.rm, a.pdt, c);
    const C invstd = a.train ? ld<C>(a.invstd, a.pdt, c) : (C)(1.0 / sqrt((double)ld<C>(a.rv, a.pdt, c) + a.eps));
    const C w = a.w ? ld<C>(a.w, a.pdt, c) : (C)1;
    double s = 0, dot = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        const int64_t off = ((i / a.S) * a.C + c) * a.S + i % a.S;
        const C g = ld<C>(a.dy, a.xdt, off);
        s += (double)g;
        dot += (double)(ld<C>(a.x, a.xdt, off) - mean) * (double)g;
    }
    s = block_sum(s, sm);
    dot = block_sum(dot, sm);
    if (a.y) {
        const C k = (C)(dot * (double)invstd * (double)invstd / (double)M), gm = (C)(s / (double)M), wi = invstd * w;
        for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
            const int64_t off = ((i / a.S) * a.C + c) * a.S + i % a.S;
            const C g = ld<C>(a.dy, a.xdt, off);
            st<C>(a.y, a.xdt, off, a.train ? (g - gm - (ld<C>(a.x, a.xdt, off) - mean) * k) * wi : g * wi);
        }
    }
    if (threadIdx.x == 0) {
        if (a.gw)
            st<C>(a.gw, a.pdt, c, (C)(dot * (double)invstd));
        if (a.gb)
            st<C>(a.gb, a.pdt, c, (C)s);
    }
}

/* group norm: one block per row i = n * G + g of L = D * S values */
template <typename C> __global__ void __launch_bounds__(kThreads) gn_forward(const od_cu_norm_args a)
{
    __shared__ double sm[32];
    const int64_t i = blockIdx.x, D = a.C / a.G, L = D * a.S, base = i * L, g = i % a.G;
    double s = 0;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x)
        s += (double)ld<C>(a.x, a.xdt, base + j);
    s = block_sum(s, sm);
    const double m = s / (double)L;
    double v = 0;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
        const double d = (double)ld<C>(a.x, a.xdt, base + j) - m;
        v += d * d;
    }
    v = block_sum(v, sm);
    const C mean = (C)m, var = (C)(v / (double)L);
    const C rstd = (C)1 / (C)sqrt((double)((var > (C)0 ? var : (C)0) + (C)a.eps));
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
        const int64_t c = g * D + j / a.S;
        const C scale = rstd * (a.w ? ld<C>(a.w, a.pdt, c) : (C)1);
        const C bias = fma(-scale, mean, a.b ? ld<C>(a.b, a.pdt, c) : (C)0);
        st<C>(a.y, a.xdt, base + j, fma(scale, ld<C>(a.x, a.xdt, base + j), bias));
    }
    if (threadIdx.x == 0) {
        st<C>(a.smean, a.pdt, i, mean);
        st<C>(a.sinvstd, a.pdt, i, rstd);
    }
}

template <typename C> __global__ void __launch_bounds__(kThreads) gn_backward(const od_cu_norm_args a)
{
    __shared__ double sm[32];
    const int64_t i = blockIdx.x, D = a.C / a.G, L = D * a.S, base = i * L, g = i % a.G;
    double *ds = a.scratch + i * D, *db = a.scratch + a.N * a.C + i * D;
    double dsv = 0, dbv = 0;
    for (int64_t j = 0; j < D; j++) {
        double p = 0, q = 0;
        for (int64_t k = threadIdx.x; k < a.S; k += blockDim.x) {
            const C gy = ld<C>(a.dy, a.xdt, base + j * a.S + k);
            p += (double)gy * (double)ld<C>(a.x, a.xdt, base + j * a.S + k);
            q += (double)gy;
        }
        p = block_sum(p, sm);
        q = block_sum(q, sm);
        const double w = a.w ? (double)ld<C>(a.w, a.pdt, g * D + j) : 1.0;
        dsv += p * w;
        dbv += q * w;
        if (threadIdx.x == 0) {
            ds[j] = p;
            db[j] = q;
        }
    }
    if (!a.y)
        return;
    const double mean = (double)ld<C>(a.mean, a.pdt, i), rstd = (double)ld<C>(a.invstd, a.pdt, i);
    const double sc = 1.0 / (double)L;
    const C c2 = (C)((dbv * mean - dsv) * rstd * rstd * rstd * sc);
    const C c3 = (C)(-(double)c2 * mean - dbv * rstd * sc);
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) {
        const int64_t c = g * D + j / a.S;
        const C c1 = (C)(rstd * (a.w ? (double)ld<C>(a.w, a.pdt, c) : 1.0));
        st<C>(a.y, a.xdt, base + j, c1 * ld<C>(a.dy, a.xdt, base + j) + c2 * ld<C>(a.x, a.xdt, base + j) + c3);
    }
}

/* one thread per channel: the sums over the batch of gn_backward's ds, db */
template <typename C> __global__ void __launch_bounds__(kThreads) gn_param_grads(const od_cu_norm_args a)
{
    const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, D = a.C / a.G;
    if (c >= a.C)
        return;
    const double *ds = a.scratch, *db = a.scratch + a.N * a.C;
    double gw = 0, gb = 0;
    for (int64_t n = 0; n < a.N; n++) {
        const int64_t i = n * a.G + c / D;
        const double mean = (double)ld<C>(a.mean, a.pdt, i), rstd = (double)ld<C>(a.invstd, a.pdt, i);
        gw += (ds[n * a.C + c] - db[n * a.C + c] * mean) * rstd;
        gb += db[n * a.C + c];
    }
    if (a.gw)
        st<C>(a.gw, a.pdt, c, (C)gw);
    if (a.gb)
        st<C>(a.gb, a.pdt, c, (C)gb);
}

template <typename C> cudaError_t run(const od_cu_norm_args *a, int sm_count, cudaStream_t s)
{
    const int64_t numel = a->N * a->C * a->S;
    const unsigned ew_blocks = (unsigned)(numel / kThreads + 1 < 8 * (int64_t)sm_count ? numel / kThreads + 1
                                                                                          : 8 * (int64_t)sm_count);
    switch (a->kind) {
    case OD_CU_NORM_BN:
        if (a->train)
            bn_stats<C><<<(unsigned)a->C, kThreads, 0, s>>>(*a);
        bn_apply<C><<<ew_blocks, kThreads, 0, s>>>(*a);
        break;
    case OD_CU_NORM_BN_BACKWARD: bn_backward<C><<<(unsigned)a->C, kThreads, 0, s>>>(*a); break;
    case OD_CU_NORM_GN: gn_forward<C><<<(unsigned)(a->N * a->G), kThreads, 0, s>>>(*a); break;
    default:
        gn_backward<C><<<(unsigned)(a->N * a->G), kThreads, 0, s>>>(*a);
        if (a->gw || a->gb)
            gn_param_grads<C><<<(unsigned)(a->C / kThreads + 1), kThreads, 0, s>>>(*a);
        break;
    }
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t od_cu_norm(const od_cu_norm_args *a, int sm_count, cudaStream_t st)
{
    if (a->N * a->C * a->S <= 0)
        return cudaSuccess;
    return a->xdt == OD_CU_FLOAT64 ? run<double>(a, sm_count, st) : run<float>(a, sm_count, st);
}
