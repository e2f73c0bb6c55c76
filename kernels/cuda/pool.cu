/* pool.cu — the launcher of the pooling operators (pool.c): max, avg,
 * adaptive avg and adaptive max pools, 2d and 3d, forward and backward.
 *
 * Invariants: the CPU kernels' loops (cpu/pool.c) one output element per
 * thread, over od_pool.h's windows in the same order, so maxima, their
 * indices (first wins, NaN wins) and sums agree with the CPU. Values
 * compute in the family of the dtype (float for float16/bfloat16/float32,
 * double, int64 whose averages divide as integers). Backward: one thread
 * per grad_output element, atomically added into the zeroed accumulator,
 * then converted into grad_input.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "cu_common.cuh"
#include "cu_pool.h"

using namespace odcu;

namespace {

template <typename C> __device__ __forceinline__ C lowest() { return -INFINITY; }
template <> __device__ __forceinline__ int64_t lowest<int64_t>() { return INT64_MIN; }
template <typename C> __device__ __forceinline__ bool is_nan(C v)
{
    if constexpr (is_int_v<C>)
        return false;
    else
        return isnan(v);
}

__device__ __forceinline__ void atomic_acc(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_acc(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_acc(int64_t *p, int64_t v)
{
    atomicAdd((unsigned long long *)p, (unsigned long long)v);
}

template <typename C> __global__ void __launch_bounds__(256) pool_fwd(const od_cu_pool_args a)
{
    const od_pool_geom *g = &a.g;
    int64_t on = g->out[0] * g->out[1] * g->out[2], inn = g->in[0] * g->in[1] * g->in[2];
    int64_t n = a.planes * on, es = dtype_size(a.dtype);
    bool mx = g->kind == OD_POOL_MAX || g->kind == OD_POOL_AMAX;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i / on, r = i % on;
        int64_t ow = r % g->out[2], oh = (r / g->out[2]) % g->out[1], ot = r / (g->out[2] * g->out[1]);
        int64_t t0, t1, ts, tsp, h0, h1, hs, hsp, w0, w1, ws, wsp;
        od_pool_window(g, 0, ot, &t0, &t1, &ts, &tsp);
        od_pool_window(g, 1, oh, &h0, &h1, &hs, &hsp);
        od_pool_window(g, 2, ow, &w0, &w1, &ws, &wsp);
        const char *x = (const char *)a.x + p * inn * es;
        char *y = (char *)a.out + i * es;
        if (mx) {
            int64_t best = (t0 * g->in[1] + h0) * g->in[2] + w0;
            C m = lowest<C>();
            for (int64_t t = t0; t < t1; t += ts)
                for (int64_t h = h0; h < h1; h += hs)
                    for (int64_t w = w0; w < w1; w += ws) {
                        int64_t at = (t * g->in[1] + h) * g->in[2] + w;
                        C v = load_dyn<C>(x + at * es, a.dtype);
                        if (v > m || is_nan(v)) {
                            m = v;
                            best = at;
                        }
                    }
            store_dyn<C>(y, a.dtype, m);
            a.out_ix[i] = best;
            continue;
        }
        /* float16 (adaptive avg 3d only) sums and divides in Half as ATen: rounded each step */
        bool rnd = a.dtype == OD_CU_FLOAT16;
        C sum = 0;
        for (int64_t t = t0; t < t1; t++)
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++) {
                    sum += load_dyn<C>(x + ((t * g->in[1] + h) * g->in[2] + w) * es, a.dtype);
                    if (rnd)
                        sum = round_to_dtype<C>(sum, a.dtype);
                }
        C v;
        if (t0 >= t1 || h0 >= h1 || w0 >= w1) {
            v = 0;
        } else if (g->kind == OD_POOL_AVG) {
            int64_t sp[3] = {tsp, hsp, wsp}, ln[3] = {t1 - t0, h1 - h0, w1 - w0};
            v = sum / (C)od_pool_avg_divisor(g, sp, ln);
        } else {
            v = sum;
            for (int64_t len : {t1 - t0, h1 - h0, w1 - w0}) { /* ATen: sum / kT / kH / kW */
                v = v / (C)len;
                if (rnd)
                    v = round_to_dtype<C>(v, a.dtype);
            }
        }
        store_dyn<C>(y, a.dtype, v);
    }
}

template <typename C> __global__ void __launch_bounds__(256) pool_bwd(const od_cu_pool_args a)
{
    const od_pool_geom *g = &a.g;
    int64_t on = g->out[0] * g->out[1] * g->out[2], inn = g->in[0] * g->in[1] * g->in[2];
    int64_t n = a.planes * on, es = dtype_size(a.dtype);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i / on, r = i % on;
        C *acc = (C *)a.acc + p * inn;
        C gv = load_dyn<C>((const char *)a.go + i * es, a.dtype);
        if (a.ix) {
            int64_t at = a.ix[i];
            if (at >= 0 && at < inn) /* never write outside the plane */
                atomic_acc(acc + at, gv);
            continue;
        }
        int64_t ow = r % g->out[2], oh = (r / g->out[2]) % g->out[1], ot = r / (g->out[2] * g->out[1]);
        int64_t t0, t1, ts, tsp, h0, h1, hs, hsp, w0, w1, ws, wsp;
        od_pool_window(g, 0, ot, &t0, &t1, &ts, &tsp);
        od_pool_window(g, 1, oh, &h0, &h1, &hs, &hsp);
        od_pool_window(g, 2, ow, &w0, &w1, &ws, &wsp);
        if (t0 >= t1 || h0 >= h1 || w0 >= w1)
            continue;
        C d;
        if (g->kind == OD_POOL_AVG) {
            int64_t sp[3] = {tsp, hsp, wsp}, ln[3] = {t1 - t0, h1 - h0, w1 - w0};
            d = gv / (C)od_pool_avg_divisor(g, sp, ln);
        } else {
            d = gv / (C)(t1 - t0) / (C)(h1 - h0) / (C)(w1 - w0);
        }
        for (int64_t t = t0; t < t1; t++)
            for (int64_t h = h0; h < h1; h++)
                for (int64_t w = w0; w < w1; w++)
                    atomic_acc(acc + (t * g->in[1] + h) * g->in[2] + w, d);
    }
}

template <typename C> __global__ void __launch_bounds__(256) acc_to_out(const od_cu_pool_args a, int64_t n)
{
    int64_t es = dtype_size(a.dtype);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        store_dyn<C>((char *)a.out + i * es, a.dtype, ((const C *)a.acc)[i]);
}

template <typename C> cudaError_t launch(const od_cu_pool_args *a, cudaStream_t st)
{
    const od_pool_geom *g = &a->g;
    int64_t on = g->out[0] * g->out[1] * g->out[2], inn = g->in[0] * g->in[1] * g->in[2];
    int64_t n = a->planes * on;
    if (n > 0) {
        unsigned grid = grid_for(n, 256, a->sm_count, 8);
        if (a->backward)
            pool_bwd<C><<<grid, 256, 0, st>>>(*a);
        else
            pool_fwd<C><<<grid, 256, 0, st>>>(*a);
    }
    if (a->backward && a->planes * inn > 0) {
        int64_t m = a->planes * inn;
        acc_to_out<C><<<grid_for(m, 256, a->sm_count, 8), 256, 0, st>>>(*a, m);
    }
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t od_cu_pool(const od_cu_pool_args *a, cudaStream_t st)
{
    switch (family_of(a->dtype)) {
    case FAM_F32: return launch<float>(a, st);
    case FAM_F64: return launch<double>(a, st);
    default: return launch<int64_t>(a, st);
    }
}
