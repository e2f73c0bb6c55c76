/* resample.cu — the launcher of upsample_nearest1d/2d/3d, upsample_linear1d
 * / bilinear2d / trilinear3d and upsample_bicubic2d and their backward
 * (resample.c).
 *
 * Invariants: the CPU kernels' arithmetic (cpu/resample.c) one output
 * element per thread: od_resample.h's indices and weights, the same blend
 * order (innermost dim first), opmath float for float32 / bfloat16 (and
 * uint8's nearest copy), double for float64. Backward: one thread per
 * grad_output element, atomically added into the zeroed accumulator, then
 * converted into grad_input. Bicubic: 4 x 4 taps from od_resample.h, rows
 * of W taps weighted by the H taps, as cpu/resample.c.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cu_common.cuh"
#include "cu_resample.h"

using namespace odcu;

namespace {

__device__ __forceinline__ void lin(const od_resample_geom *g, int d, int64_t o, int64_t *i0, int64_t *i1, float *l0,
                                    float *l1)
{
    od_resample_linear_f32(g, d, o, i0, i1, l0, l1);
}
__device__ __forceinline__ void lin(const od_resample_geom *g, int d, int64_t o, int64_t *i0, int64_t *i1, double *l0,
                                    double *l1)
{
    od_resample_linear_f64(g, d, o, i0, i1, l0, l1);
}

/* the sources and weights of output (od, oh, ow), per dim */
__device__ __forceinline__ int64_t near_fwd(const od_resample_geom *g, int d, int64_t o, float)
{
    return od_resample_nearest_fwd_f32(g, d, o);
}
__device__ __forceinline__ int64_t near_fwd(const od_resample_geom *g, int d, int64_t o, double)
{
    return od_resample_nearest_fwd_f64(g, d, o);
}

/* the sources and weights of output (od, oh, ow), per dim (nearest:
 * compute_indices_weights_nearest forward, nearest_idx backward, as on
 * the CPU) */
template <typename C>
__device__ __forceinline__ void sources(const od_resample_geom *g, const int64_t *o, bool backward, int64_t (*ix)[2],
                                        C (*w)[2])
{
    for (int d = 0; d < 3; d++) {
        if (g->kind == OD_RESAMPLE_NEAREST) {
            ix[d][0] = ix[d][1] = backward ? od_resample_nearest(g, d, o[d]) : near_fwd(g, d, o[d], (C)0);
            w[d][0] = 1;
            w[d][1] = 0;
        } else {
            lin(g, d, o[d], &ix[d][0], &ix[d][1], &w[d][0], &w[d][1]);
        }
    }
}

template <typename C> __global__ void __launch_bounds__(256) rs_fwd(const od_cu_resample_args a)
{
    const od_resample_geom *g = &a.g;
    int64_t on = g->out[0] * g->out[1] * g->out[2], inn = g->in[0] * g->in[1] * g->in[2];
    int64_t n = a.planes * on, es = dtype_size(a.dtype);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i / on, r = i % on;
        int64_t o[3] = {r / (g->out[2] * g->out[1]), (r / g->out[2]) % g->out[1], r % g->out[2]};
        int64_t ix[3][2];
        C w[3][2];
        sources<C>(g, o, a.backward, ix, w);
        const char *x = (const char *)a.x + p * inn * es;
        char *y = (char *)a.out + i * es;
        if (g->kind == OD_RESAMPLE_NEAREST) {
            int64_t at = (ix[0][0] * g->in[1] + ix[1][0]) * g->in[2] + ix[2][0];
            for (int64_t b = 0; b < es; b++) /* a copy of the element's bytes */
                y[b] = x[at * es + b];
            continue;
        }
        C t[2];
        for (int q = 0; q < 2; q++) {
            C h[2];
            for (int b = 0; b < 2; b++) {
                int64_t row = (ix[0][q] * g->in[1] + ix[1][b]) * g->in[2];
                h[b] = load_dyn<C>(x + (row + ix[2][0]) * es, a.dtype) * w[2][0] +
                       load_dyn<C>(x + (row + ix[2][1]) * es, a.dtype) * w[2][1];
            }
            t[q] = h[0] * w[1][0] + h[1] * w[1][1];
        }
        C v = g->out[0] == 1 && g->in[0] == 1 ? t[0] : t[0] * w[0][0] + t[1] * w[0][1];
        store_dyn<C>(y, a.dtype, v);
    }
}

template <typename C> __global__ void __launch_bounds__(256) rs_bwd(const od_cu_resample_args a)
{
    const od_resample_geom *g = &a.g;
    int64_t on = g->out[0] * g->out[1] * g->out[2], inn = g->in[0] * g->in[1] * g->in[2];
    int64_t n = a.planes * on, es = dtype_size(a.dtype);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i / on, r = i % on;
        int64_t o[3] = {r / (g->out[2] * g->out[1]), (r / g->out[2]) % g->out[1], r % g->out[2]};
        int64_t ix[3][2];
        C w[3][2];
        sources<C>(g, o, a.backward, ix, w);
        C v = load_dyn<C>((const char *)a.x + i * es, a.dtype);
        C *acc = (C *)a.acc + p * inn;
        if (g->kind == OD_RESAMPLE_NEAREST) {
            atomicAdd(acc + (ix[0][0] * g->in[1] + ix[1][0]) * g->in[2] + ix[2][0], v);
            continue;
        }
        for (int q = 0; q < 2; q++)
            for (int b = 0; b < 2; b++)
                for (int e = 0; e < 2; e++) {
                    C wt = w[0][q] * w[1][b] * w[2][e];
                    if (wt != 0)
                        atomicAdd(acc + (ix[0][q] * g->in[1] + ix[1][b]) * g->in[2] + ix[2][e], wt * v);
                }
    }
}

__device__ __forceinline__ void cub(const od_resample_geom *g, int d, int64_t o, int guard, int64_t *ix, float *w)
{
    od_resample_cubic_f32(g, d, o, guard, ix, w);
}
__device__ __forceinline__ void cub(const od_resample_geom *g, int d, int64_t o, int guard, int64_t *ix, double *w)
{
    od_resample_cubic_f64(g, d, o, guard, ix, w);
}

template <typename C> __global__ void __launch_bounds__(256) cubic_fwd(const od_cu_resample_args a)
{
    const od_resample_geom *g = &a.g;
    int64_t OH = g->out[1], OW = g->out[2], IW = g->in[2], inn = g->in[1] * IW;
    int64_t n = a.planes * OH * OW, es = dtype_size(a.dtype);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i / (OH * OW), r = i % (OH * OW);
        int64_t ih[4], iw[4];
        C wh[4], ww[4];
        cub(g, 1, r / OW, 0, ih, wh);
        cub(g, 2, r % OW, 0, iw, ww);
        const char *x = (const char *)a.x + p * inn * es;
        C acc = 0;
        for (int j = 0; j < 4; j++) {
            const char *row = x + ih[j] * IW * es;
            C t = load_dyn<C>(row + iw[0] * es, a.dtype) * ww[0];
            for (int k = 1; k < 4; k++)
                t += load_dyn<C>(row + iw[k] * es, a.dtype) * ww[k];
            acc = j == 0 ? t * wh[0] : acc + t * wh[j];
        }
        store_dyn<C>((char *)a.out + i * es, a.dtype, acc);
    }
}

template <typename C> __global__ void __launch_bounds__(256) cubic_bwd(const od_cu_resample_args a)
{
    const od_resample_geom *g = &a.g;
    int64_t OH = g->out[1], OW = g->out[2], IW = g->in[2], inn = g->in[1] * IW;
    int64_t n = a.planes * OH * OW, es = dtype_size(a.dtype);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i / (OH * OW), r = i % (OH * OW);
        int64_t ih[4], iw[4];
        C wh[4], ww[4];
        cub(g, 1, r / OW, 1, ih, wh);
        cub(g, 2, r % OW, 1, iw, ww);
        if (g->in[1] == OH && g->in[2] == OW) { /* ATen copies when the sizes match, whatever the scales */
            for (int k = 0; k < 4; k++) {
                ih[k] = r / OW;
                iw[k] = r % OW;
                wh[k] = ww[k] = k == 1;
            }
        }
        C v = load_dyn<C>((const char *)a.x + i * es, a.dtype);
        C *acc = (C *)a.acc + p * inn;
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 4; k++)
                atomicAdd(acc + ih[j] * IW + iw[k], v * wh[j] * ww[k]);
    }
}

template <typename C> __global__ void __launch_bounds__(256) acc_to_out(const od_cu_resample_args a, int64_t n)
{
    int64_t es = dtype_size(a.dtype);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        store_dyn<C>((char *)a.out + i * es, a.dtype, ((const C *)a.acc)[i]);
}

template <typename C> cudaError_t launch(const od_cu_resample_args *a, cudaStream_t st)
{
    const od_resample_geom *g = &a->g;
    int64_t n = a->planes * g->out[0] * g->out[1] * g->out[2], m = a->planes * g->in[0] * g->in[1] * g->in[2];
    if (n > 0) {
        unsigned grid = grid_for(n, 256, a->sm_count, 8);
        bool cubic = g->kind == OD_RESAMPLE_CUBIC;
        if (a->backward && cubic)
            cubic_bwd<C><<<grid, 256, 0, st>>>(*a);
        else if (a->backward)
            rs_bwd<C><<<grid, 256, 0, st>>>(*a);
        else if (cubic)
            cubic_fwd<C><<<grid, 256, 0, st>>>(*a);
        else
            rs_fwd<C><<<grid, 256, 0, st>>>(*a);
    }
    if (a->backward && m > 0)
        acc_to_out<C><<<grid_for(m, 256, a->sm_count, 8), 256, 0, st>>>(*a, m);
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t od_cu_resample(const od_cu_resample_args *a, cudaStream_t st)
{
    return a->dtype == OD_CU_FLOAT64 ? launch<double>(a, st) : launch<float>(a, st);
}
