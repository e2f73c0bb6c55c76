/* attention.cu — the fused _scaled_dot_product_attention_forward on CUDA:
 * a straightforward tiled kernel with an online softmax.
 *
 * Invariants:
 *  - One block per (batch, tile of BQ query rows), 128 threads. The block
 *    keeps its scaled query tile, a key and a value tile of BK rows, the
 *    [BQ, BK] scores, the unnormalised output [BQ, Ev] and each row's
 *    running max m and sum l in shared memory: memory linear in the
 *    sequence lengths, nothing of size L x S in device memory.
 *  - Per key tile: scores (dot products, masked as ATen does, by adding
 *    -inf for causal keys after the row and false bool entries, or the
 *    floating mask; every key tile is read, causal or not), then threads
 *    0..BQ-1 move their row's m to max(m, tile max) and rescale l and the
 *    output by exp(m_old - m), then O = O * alpha + P V. The output is
 *    O / l; a row with every key masked is NaN, a row with S == 0 is 0, as
 *    the CPU kernel (kernels/cpu/attention.c) and torch's math path give.
 *  - Math in the operands' precision (float or double); the query is scaled
 *    by 1/sqrt(E) first, in that precision, as ATen does.
 *  - The weights, when asked for, are a second pass over the key tiles:
 *    exp(s - m) / l.
 */
#include <math.h>

#include "cu_attention.h"

namespace {

constexpr int BQ = 16, BK = 16, kThreads = 128;

template <typename T> struct tiles {
    T *q, *k, *v, *o, *s, *m, *l, *alpha;
};

template <typename T> __device__ tiles<T> carve(unsigned char *raw, int64_t E, int64_t Ev)
{
    tiles<T> t;
    t.q = reinterpret_cast<T *>(raw);
    t.k = t.q + BQ * E;
    t.v = t.k + BK * E;
    t.o = t.v + BK * Ev;
    t.s = t.o + BQ * Ev;
    t.m = t.s + BQ * BK;
    t.l = t.m + BQ;
    t.alpha = t.l + BQ;
    return t;
}

template <typename T> __device__ __forceinline__ T cexp(T x);
template <> __device__ __forceinline__ float cexp<float>(float x) { return expf(x); }
template <> __device__ __forceinline__ double cexp<double>(double x) { return exp(x); }

/* Score of query row r (absolute i) against key j of the tile (absolute jj). */
template <typename T>
__device__ T score(const od_cu_sdpa_args &a, const tiles<T> &t, const unsigned char *mrow, int r, int j, int64_t i,
                   int64_t jj)
{
    T s = 0;
    for (int64_t e = 0; e < a.E; e++)
        s += t.q[r * a.E + e] * t.k[j * a.E + e];
    if (a.causal && jj > i) /* ATen adds -inf: NaN and +inf scores give NaN */
        return s + (T)-INFINITY;
    if (mrow) {
        int64_t mi = i * a.mr + jj * a.mc;
        if (a.mask_bool)
            s += mrow[mi] ? (T)0 : (T)-INFINITY;
        else
            s += reinterpret_cast<const T *>(mrow)[mi];
    }
    return s;
}

template <typename T> __device__ void load_keys(const od_cu_sdpa_args &a, const tiles<T> &t, const T *k, int64_t j0, int bc)
{
    for (int64_t x = threadIdx.x; x < BK * a.E; x += blockDim.x) {
        int64_t j = x / a.E, e = x % a.E;
        t.k[x] = j < bc ? k[(j0 + j) * a.kr + e * a.kc] : (T)0;
    }
}

template <typename T> __global__ void __launch_bounds__(kThreads) sdpa_fwd(od_cu_sdpa_args a)
{
    extern __shared__ __align__(16) unsigned char raw[];
    tiles<T> t = carve<T>(raw, a.E, a.Ev);
    int64_t nqb = (a.L + BQ - 1) / BQ;
    int64_t b = blockIdx.x / nqb, i0 = (blockIdx.x % nqb) * BQ;
    int64_t qo = 0, ko = 0, vo = 0, mo = 0, rem = b;
    for (int d = a.nb - 1; d >= 0; d--) {
        int64_t ix = rem % a.bsizes[d];
        rem /= a.bsizes[d];
        qo += ix * a.qb[d];
        ko += ix * a.kb[d];
        vo += ix * a.vb[d];
        mo += ix * a.mb[d];
    }
    const T *q = reinterpret_cast<const T *>(a.q) + qo, *k = reinterpret_cast<const T *>(a.k) + ko,
            *v = reinterpret_cast<const T *>(a.v) + vo;
    const unsigned char *mrow =
        a.mask ? reinterpret_cast<const unsigned char *>(a.mask) + mo * (a.mask_bool ? 1 : (int64_t)sizeof(T)) : nullptr;
    int br = (int)(a.L - i0 < BQ ? a.L - i0 : BQ);
    T scale = (T)a.scale;
    for (int64_t x = threadIdx.x; x < BQ * a.E; x += blockDim.x) {
        int64_t r = x / a.E, e = x % a.E;
        t.q[x] = r < br ? q[(i0 + r) * a.qr + e * a.qc] * scale : (T)0;
    }
    for (int64_t x = threadIdx.x; x < BQ * a.Ev; x += blockDim.x)
        t.o[x] = 0;
    if (threadIdx.x < BQ) {
        t.m[threadIdx.x] = (T)-INFINITY;
        t.l[threadIdx.x] = 0;
    }
    __syncthreads();
    int64_t kend = a.S; /* causal rows read every key too: a masked NaN or +inf score makes a row NaN */
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        int bc = (int)(kend - j0 < BK ? kend - j0 : BK);
        load_keys(a, t, k, j0, bc);
        for (int64_t x = threadIdx.x; x < BK * a.Ev; x += blockDim.x) {
            int64_t j = x / a.Ev, c = x % a.Ev;
            t.v[x] = j < bc ? v[(j0 + j) * a.vr + c * a.vc] : (T)0;
        }
        __syncthreads();
        for (int x = threadIdx.x; x < BQ * BK; x += blockDim.x) {
            int r = x / BK, j = x % BK;
            t.s[x] = r < br && j < bc ? score(a, t, mrow, r, j, i0 + r, j0 + j) : (T)-INFINITY;
        }
        __syncthreads();
        if (threadIdx.x < br) {
            int r = threadIdx.x;
            T *row = t.s + r * BK, mx = (T)-INFINITY;
            for (int j = 0; j < bc; j++)
                mx = row[j] > mx ? row[j] : mx;
            T mn = t.m[r] > mx ? t.m[r] : mx;
            if (mn == (T)-INFINITY) { /* everything so far masked: adds nothing */
                for (int j = 0; j < BK; j++)
                    row[j] = 0;
                t.alpha[r] = 1;
            } else {
                T alpha = cexp(t.m[r] - mn), sum = 0;
                for (int j = 0; j < BK; j++) {
                    T p = j < bc ? cexp(row[j] - mn) : (T)0;
                    row[j] = p;
                    sum += p;
                }
                t.l[r] = t.l[r] * alpha + sum;
                t.m[r] = mn;
                t.alpha[r] = alpha;
            }
        }
        __syncthreads();
        for (int64_t x = threadIdx.x; x < br * a.Ev; x += blockDim.x) {
            int64_t r = x / a.Ev, c = x % a.Ev;
            T acc = t.o[x] * t.alpha[r];
            for (int j = 0; j < bc; j++)
                acc += t.s[r * BK + j] * t.v[j * a.Ev + c];
            t.o[x] = acc;
        }
        __syncthreads();
    }
    T *out = reinterpret_cast<T *>(a.out);
    for (int64_t x = threadIdx.x; x < br * a.Ev; x += blockDim.x) {
        int64_t r = x / a.Ev, c = x % a.Ev;
        T y = a.S == 0 ? (T)0 : t.m[r] == (T)-INFINITY ? (T)NAN : t.o[x] / t.l[r];
        out[(b * a.L + i0 + r) * a.Ev + c] = y;
    }
    if (!a.w)
        return;
    T *w = reinterpret_cast<T *>(a.w);
    for (int64_t j0 = 0; j0 < a.S; j0 += BK) {
        int bc = (int)(a.S - j0 < BK ? a.S - j0 : BK);
        __syncthreads();
        load_keys(a, t, k, j0, bc);
        __syncthreads();
        for (int x = threadIdx.x; x < BQ * BK; x += blockDim.x) {
            int r = x / BK, j = x % BK;
            if (r >= br || j >= bc)
                continue;
            T s = score(a, t, mrow, r, j, i0 + r, j0 + j);
            T y = t.m[r] == (T)-INFINITY ? (T)NAN : cexp(s - t.m[r]) / t.l[r];
            w[(b * a.L + i0 + r) * a.S + j0 + j] = y;
        }
    }
}

} // namespace

extern "C" size_t od_cu_sdpa_smem(const od_cu_sdpa_args *a)
{
    size_t es = a->f64 ? sizeof(double) : sizeof(float);
    return es * (size_t)((BQ + BK) * a->E + (BK + BQ) * a->Ev + BQ * BK + 3 * BQ);
}

extern "C" cudaError_t od_cu_sdpa(const od_cu_sdpa_args *a, cudaStream_t stream)
{
    int64_t blocks = a->nbatch * ((a->L + BQ - 1) / BQ);
    if (blocks == 0)
        return cudaSuccess;
    size_t smem = od_cu_sdpa_smem(a);
    if (a->f64)
        sdpa_fwd<double><<<(unsigned)blocks, kThreads, smem, stream>>>(*a);
    else
        sdpa_fwd<float><<<(unsigned)blocks, kThreads, smem, stream>>>(*a);
    return cudaGetLastError();
}
