/* dist.cu — the distance kernels on the device (cu_dist.h): _cdist_forward,
 * _pdist_forward and their _backward.
 *
 * Invariants: one thread per result element in grid-stride loops with
 * 64-bit indices, each running the CPU kernel's loop for that element in
 * the CPU's order (od_dist.h's math): a distance over the columns; a cdist
 * gradient over x2's rows; a pdist gradient first subtracting the pairs
 * (j < i, i) then adding the pairs (i, j > i), each in order. Nothing is
 * shared between threads, so no atomics and the results are deterministic.
 */
#include "cu_common.cuh"
#include "cu_dist.h"
#include "od_dist.h"

namespace {

template <typename T> struct M;
template <> struct M<float> {
    static __device__ float map(int k, float d, float p) { return od_dist_map_f32(k, d, p); }
    static __device__ float red(int k, float a, float u) { return od_dist_red_f32(k, a, u); }
    static __device__ float fin(int k, float a, float p) { return od_dist_finish_f32(k, a, p); }
    static __device__ float bw(int k, float d, float g, float s, float p) { return od_dist_bw_f32(k, d, g, s, p); }
};
template <> struct M<double> {
    static __device__ double map(int k, double d, double p) { return od_dist_map_f64(k, d, p); }
    static __device__ double red(int k, double a, double u) { return od_dist_red_f64(k, a, u); }
    static __device__ double fin(int k, double a, double p) { return od_dist_finish_f64(k, a, p); }
    static __device__ double bw(int k, double d, double g, double s, double p) { return od_dist_bw_f64(k, d, g, s, p); }
};

#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <typename T> __global__ void cdist_fwd(const od_cu_dist_args a)
{
    const T *x1 = (const T *)a.x1, *x2 = (const T *)a.x2;
    T *out = (T *)a.out, p = (T)a.p;
    int64_t n = a.B * a.r1 * a.r2;
    GRID_LOOP(o, n) {
        int64_t j = o % a.r2, r = o / a.r2, b = r / a.r1;
        const T *u = x1 + r * a.m, *v = x2 + (b * a.r2 + j) * a.m;
        T agg = 0;
        for (int64_t k = 0; k < a.m; k++)
            agg = M<T>::red(a.kind, agg, M<T>::map(a.kind, u[k] - v[k], p));
        out[o] = M<T>::fin(a.kind, agg, p);
    }
}

/* ATen's pair -> rows mapping, in double as its CUDA kernel */
__device__ __forceinline__ void pair_rows(int64_t k, int64_t n, int64_t *i, int64_t *j)
{
    double n2 = (double)n - .5;
    int64_t r = (int64_t)(n2 - sqrt(n2 * n2 - 2.0 * (double)k - 1.0));
    /* guard the rounding at row boundaries */
    while (r > 0 && r * (n - 1) - r * (r - 1) / 2 > k)
        r--;
    while ((r + 1) * (n - 1) - (r + 1) * r / 2 <= k)
        r++;
    *i = r;
    *j = k - (r * (n - 1) - r * (r - 1) / 2) + r + 1;
}

template <typename T> __global__ void pdist_fwd(const od_cu_dist_args a)
{
    const T *x = (const T *)a.x1;
    T *out = (T *)a.out, p = (T)a.p;
    GRID_LOOP(o, a.combs) {
        int64_t i, j;
        pair_rows(o, a.r1, &i, &j);
        const T *u = x + i * a.m, *v = x + j * a.m;
        T agg = 0;
        for (int64_t k = 0; k < a.m; k++)
            agg = M<T>::red(a.kind, agg, M<T>::map(a.kind, u[k] - v[k], p));
        out[o] = M<T>::fin(a.kind, agg, p);
    }
}

template <typename T> __global__ void cdist_bwd(const od_cu_dist_args a)
{
    const T *x1 = (const T *)a.x1, *x2 = (const T *)a.x2, *g = (const T *)a.grad, *d = (const T *)a.dist;
    T *out = (T *)a.out, p = (T)a.p;
    int64_t n = a.B * a.r1 * a.m;
    GRID_LOOP(o, n) {
        int64_t k = o % a.m, r = o / a.m, b = r / a.r1;
        T u = x1[o], acc = 0;
        for (int64_t j = 0; j < a.r2; j++)
            acc += M<T>::bw(a.kind, u - x2[(b * a.r2 + j) * a.m + k], g[r * a.r2 + j], d[r * a.r2 + j], p);
        out[o] = acc;
    }
}

template <typename T> __global__ void pdist_bwd(const od_cu_dist_args a)
{
    const T *x = (const T *)a.x1, *g = (const T *)a.grad, *d = (const T *)a.dist;
    T *out = (T *)a.out, p = (T)a.p;
    int64_t nn = a.r1, n = nn * a.m;
    GRID_LOOP(o, n) {
        int64_t k = o % a.m, i = o / a.m;
        T u = x[o], acc = 0;
        for (int64_t j = 0; j < i; j++) {
            int64_t at = j * (nn - 1) - j * (j - 1) / 2 + (i - j - 1);
            acc -= M<T>::bw(a.kind, x[j * a.m + k] - u, g[at], d[at], p);
        }
        int64_t base = i * (nn - 1) - i * (i - 1) / 2 - (i + 1);
        for (int64_t j = i + 1; j < nn; j++)
            acc += M<T>::bw(a.kind, u - x[j * a.m + k], g[base + j], d[base + j], p);
        out[o] = acc;
    }
}

template <typename T> cudaError_t launch(const od_cu_dist_args *a, cudaStream_t st)
{
    int64_t n;
    switch (a->op) {
    case OD_DISTOP_CDIST: n = a->B * a->r1 * a->r2; break;
    case OD_DISTOP_PDIST: n = a->combs; break;
    case OD_DISTOP_CDIST_BW: n = a->B * a->r1 * a->m; break;
    default: n = a->r1 * a->m; break;
    }
    if (n <= 0)
        return cudaSuccess;
    unsigned grid = odcu::grid_for(n, 256, a->sm_count, 8);
    switch (a->op) {
    case OD_DISTOP_CDIST: cdist_fwd<T><<<grid, 256, 0, st>>>(*a); break;
    case OD_DISTOP_PDIST: pdist_fwd<T><<<grid, 256, 0, st>>>(*a); break;
    case OD_DISTOP_CDIST_BW: cdist_bwd<T><<<grid, 256, 0, st>>>(*a); break;
    default: pdist_bwd<T><<<grid, 256, 0, st>>>(*a); break;
    }
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t od_cu_dist(const od_cu_dist_args *a, cudaStream_t st)
{
    return a->f64 ? launch<double>(a, st) : launch<float>(a, st);
}
