/* conv.cu — convolution's device loops: im2col, col2im, bias fill and bias
 * gradient (conv_cu.h), for float and double.
 *
 * Invariants: one thread per output element in grid-stride loops with
 * 64-bit indices; col2im gathers (each image element sums the column
 * entries of its windows), so it needs no atomics and is deterministic, as
 * the CPU kernel is in its own order. The bias gradient is one block per
 * channel, accumulating in double.
 */
#include "conv_cu.h"
#include "cu_common.cuh"

namespace {

template <typename T> __global__ void im2col_kernel(od_cu_conv_geo g, const T *im, T *col)
{
    int64_t n = g.c * g.kvol * g.lgrid;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t l = i % g.lgrid, r = i / g.lgrid;
        int64_t c = r / g.kvol, t = r % g.kvol;
        int64_t kw = t % g.k[2], kh = (t / g.k[2]) % g.k[1], kd = t / (g.k[2] * g.k[1]);
        int64_t ow = l % g.grid[2], oh = (l / g.grid[2]) % g.grid[1], od = l / (g.grid[2] * g.grid[1]);
        int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0], ih = oh * g.s[1] - g.p[1] + kh * g.d[1],
                iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
        bool in = id >= 0 && id < g.img[0] && ih >= 0 && ih < g.img[1] && iw >= 0 && iw < g.img[2];
        col[i] = in ? im[c * g.limg + (id * g.img[1] + ih) * g.img[2] + iw] : T(0);
    }
}

/* the grid position o along a dim reading image index i through tap kk, or -1 */
__device__ __forceinline__ int64_t grid_pos(int64_t i, int64_t kk, int64_t s, int64_t p, int64_t d, int64_t grid)
{
    int64_t v = i + p - kk * d;
    if (v < 0 || v % s)
        return -1;
    v /= s;
    return v < grid ? v : -1;
}

template <typename T> __global__ void col2im_kernel(od_cu_conv_geo g, const T *col, T *im)
{
    int64_t n = g.c * g.limg;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i / g.limg, e = i % g.limg;
        int64_t iw = e % g.img[2], ih = (e / g.img[2]) % g.img[1], id = e / (g.img[2] * g.img[1]);
        T acc = 0;
        for (int64_t kd = 0; kd < g.k[0]; kd++) {
            int64_t od = grid_pos(id, kd, g.s[0], g.p[0], g.d[0], g.grid[0]);
            if (od < 0)
                continue;
            for (int64_t kh = 0; kh < g.k[1]; kh++) {
                int64_t oh = grid_pos(ih, kh, g.s[1], g.p[1], g.d[1], g.grid[1]);
                if (oh < 0)
                    continue;
                for (int64_t kw = 0; kw < g.k[2]; kw++) {
                    int64_t ow = grid_pos(iw, kw, g.s[2], g.p[2], g.d[2], g.grid[2]);
                    if (ow < 0)
                        continue;
                    int64_t r = c * g.kvol + (kd * g.k[1] + kh) * g.k[2] + kw;
                    acc += col[r * g.lgrid + (od * g.grid[1] + oh) * g.grid[2] + ow];
                }
            }
        }
        im[i] += acc;
    }
}

template <typename T> __global__ void bias_fill_kernel(T *out, const T *bias, int64_t n, int64_t c, int64_t l)
{
    int64_t total = n * c * l;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = bias ? bias[(i / l) % c] : T(0);
}

template <typename T> __global__ void bias_add_kernel(T *out, const T *bias, int64_t n, int64_t c, int64_t l)
{
    int64_t total = n * c * l;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        out[i] += bias[(i / l) % c];
}

template <typename T> __global__ void bias_grad_kernel(const T *grad, T *gb, int64_t n, int64_t c, int64_t l)
{
    __shared__ double part[256];
    int64_t ch = blockIdx.x;
    double acc = 0;
    for (int64_t j = threadIdx.x; j < n * l; j += blockDim.x)
        acc += (double)grad[((j / l) * c + ch) * l + j % l];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        gb[ch] = (T)part[0];
}

} // namespace

using odcu::grid_for;

extern "C" cudaError_t od_cu_im2col(const od_cu_conv_geo *g, bool f64, const void *im, void *col, int sm_count,
                                    cudaStream_t st)
{
    int64_t n = g->c * g->kvol * g->lgrid;
    if (n <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(n, 256, sm_count, 8);
    if (f64)
        im2col_kernel<double><<<grid, 256, 0, st>>>(*g, (const double *)im, (double *)col);
    else
        im2col_kernel<float><<<grid, 256, 0, st>>>(*g, (const float *)im, (float *)col);
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_col2im(const od_cu_conv_geo *g, bool f64, const void *col, void *im, int sm_count,
                                    cudaStream_t st)
{
    int64_t n = g->c * g->limg;
    if (n <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(n, 256, sm_count, 8);
    if (f64)
        col2im_kernel<double><<<grid, 256, 0, st>>>(*g, (const double *)col, (double *)im);
    else
        col2im_kernel<float><<<grid, 256, 0, st>>>(*g, (const float *)col, (float *)im);
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_conv_bias_fill(bool f64, void *out, const void *bias, int64_t n, int64_t c, int64_t l,
                                            int sm_count, cudaStream_t st)
{
    int64_t total = n * c * l;
    if (total <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(total, 256, sm_count, 8);
    if (f64)
        bias_fill_kernel<double><<<grid, 256, 0, st>>>((double *)out, (const double *)bias, n, c, l);
    else
        bias_fill_kernel<float><<<grid, 256, 0, st>>>((float *)out, (const float *)bias, n, c, l);
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_conv_bias_add(bool f64, void *out, const void *bias, int64_t n, int64_t c, int64_t l,
                                           int sm_count, cudaStream_t st)
{
    int64_t total = n * c * l;
    if (total <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(total, 256, sm_count, 8);
    if (f64)
        bias_add_kernel<double><<<grid, 256, 0, st>>>((double *)out, (const double *)bias, n, c, l);
    else
        bias_add_kernel<float><<<grid, 256, 0, st>>>((float *)out, (const float *)bias, n, c, l);
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_conv_bias_grad(bool f64, const void *grad, void *gb, int64_t n, int64_t c, int64_t l,
                                            cudaStream_t st)
{
    if (c <= 0)
        return cudaSuccess;
    if (f64)
        bias_grad_kernel<double><<<(unsigned)c, 256, 0, st>>>((const double *)grad, (double *)gb, n, c, l);
    else
        bias_grad_kernel<float><<<(unsigned)c, 256, 0, st>>>((const float *)grad, (float *)gb, n, c, l);
    return cudaGetLastError();
}
