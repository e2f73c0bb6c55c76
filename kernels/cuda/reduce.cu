/* reduce.cu — sum, mean, prod, amax, amin, argmax, argmin, var over any set of dims.
 *
 * Invariants:
 *  - The input is viewed as M outputs (kept dims) x R reduced elements
 *    (reduced dims, in the input's row-major order, so argmax's index is the
 *    position in that order). Output o is contiguous element o.
 *  - A block is (L lanes) x (256 / L rows): L lanes cooperate on one output,
 *    each folding every L-th element of its chunk into an accumulator, then
 *    the lanes merge by warp shuffles (and shared memory when L > 32). When
 *    the reduced dims end in a stride-1 dim the lanes read consecutive
 *    elements (16-byte vectors when aligned); otherwise L = 1 and consecutive
 *    threads take consecutive outputs.
 *  - With few outputs the R elements are split into G chunks (grid.y): each
 *    chunk writes a partial accumulator to the workspace and a second kernel
 *    merges the G partials per output. The merge is associative (argmax
 *    breaks ties by index; Welford merges for var), so the result does not
 *    depend on L or G beyond float rounding.
 *  - Accumulation: sum/mean/prod in the output dtype's family (float for half,
 *    bfloat16 and float32; double; int64 for integers and bool, wrapping),
 *    amax/amin/argmax/argmin in the input's family, var in float/double (Welford).
 */
#include <float.h>

#include "cu_common.cuh"

using namespace odcu;

namespace {

/* ---- operations ------------------------------------------------------------------------- */

template <typename A> __device__ __forceinline__ A lowest_of()
{
    if constexpr (is_int_v<A>)
        return INT64_MIN;
    else
        return -(A)INFINITY;
}
template <typename A> __device__ __forceinline__ A highest_of()
{
    if constexpr (is_int_v<A>)
        return INT64_MAX;
    else
        return (A)INFINITY;
}

template <typename A, bool MEAN> struct SumOp {
    using acc_t = A;
    using in_t = A;
    double correction;
    int64_t count;
    __device__ A init() const { return A(0); }
    __device__ A merge(A a, A b) const
    {
        if constexpr (is_int_v<A>)
            return od_math_wrap_add_i64(a, b);
        else
            return a + b;
    }
    __device__ A reduce(A a, A x, int64_t) const { return merge(a, x); }
    __device__ void store(char *p, int dt, A a) const
    {
        if constexpr (MEAN && !is_int_v<A>)
            a = a / (A)count;
        store_dyn<A>(p, dt, a);
    }
};

template <typename A> struct ProdOp {
    using acc_t = A;
    using in_t = A;
    double correction;
    int64_t count;
    __device__ A init() const { return A(1); }
    __device__ A merge(A a, A b) const
    {
        if constexpr (is_int_v<A>)
            return (A)((uint64_t)a * (uint64_t)b); /* int64 wraparound without signed overflow */
        else
            return a * b;
    }
    __device__ A reduce(A a, A x, int64_t) const { return merge(a, x); }
    __device__ void store(char *p, int dt, A a) const { store_dyn<A>(p, dt, a); }
};

template <typename A, bool MAX> struct MinMaxOp {
    using acc_t = A;
    using in_t = A;
    double correction;
    int64_t count;
    __device__ A init() const { return MAX ? lowest_of<A>() : highest_of<A>(); }
    __device__ A merge(A a, A b) const
    {
        if constexpr (is_int_v<A>)
            return MAX ? od_math_maximum_i64(a, b) : od_math_minimum_i64(a, b);
        else if constexpr (std::is_same<A, double>::value)
            return MAX ? od_math_maximum_f64(a, b) : od_math_minimum_f64(a, b);
        else
            return MAX ? od_math_maximum_f32(a, b) : od_math_minimum_f32(a, b);
    }
    __device__ A reduce(A a, A x, int64_t) const { return merge(a, x); }
    __device__ void store(char *p, int dt, A a) const { store_dyn<A>(p, dt, a); }
};

template <typename A> struct ArgAcc {
    A v;
    int64_t i;
};

template <typename A, bool MAX> struct ArgMaxOp {
    using acc_t = ArgAcc<A>;
    using in_t = A;
    double correction;
    int64_t count;
    __device__ acc_t init() const { return acc_t{MAX ? lowest_of<A>() : highest_of<A>(), INT64_MAX}; }
    /* NaN wins for argmax and argmin alike (first NaN); ties go to the smaller index. */
    __device__ acc_t merge(acc_t a, acc_t b) const
    {
        bool an = a.v != a.v, bn = b.v != b.v;
        if (an || bn) {
            if (an && bn)
                return a.i <= b.i ? a : b;
            return an ? a : b;
        }
        if (MAX ? a.v > b.v : a.v < b.v)
            return a;
        if (MAX ? b.v > a.v : b.v < a.v)
            return b;
        return a.i <= b.i ? a : b;
    }
    __device__ acc_t reduce(acc_t a, A x, int64_t i) const { return merge(a, acc_t{x, i}); }
    __device__ void store(char *p, int, acc_t a) const { *(int64_t *)p = a.i; }
};

template <typename A> struct WelAcc {
    A mean, m2;
    int64_t n;
};

template <typename A> struct VarOp {
    using acc_t = WelAcc<A>;
    using in_t = A;
    double correction;
    int64_t count;
    __device__ acc_t init() const { return acc_t{A(0), A(0), 0}; }
    __device__ acc_t reduce(acc_t a, A x, int64_t) const
    {
        a.n++;
        A d = x - a.mean;
        a.mean += d / (A)a.n;
        a.m2 += d * (x - a.mean);
        return a;
    }
    __device__ acc_t merge(acc_t a, acc_t b) const
    {
        if (b.n == 0)
            return a;
        if (a.n == 0)
            return b;
        int64_t n = a.n + b.n;
        A d = b.mean - a.mean;
        A fb = (A)b.n / (A)n;
        acc_t r;
        r.mean = a.mean + d * fb;
        r.m2 = a.m2 + b.m2 + d * d * (A)a.n * fb;
        r.n = n;
        return r;
    }
    __device__ void store(char *p, int dt, acc_t a) const
    {
        A div = (A)a.n - (A)correction;
        if (div < (A)0)
            div = (A)0;
        /* nothing reduced: NaN whatever the divisor, as ATen fills it */
        store_dyn<A>(p, dt, a.n == 0 ? (A)NAN : a.m2 / div);
    }
};

/* ---- the kernels ------------------------------------------------------------------------------ */

struct RedParams {
    const char *in;
    char *out;
    void *ws;              /* G > 1: partials [M][G] */
    int32_t out_dtype, out_es;
    int32_t nkept, nred;   /* dims innermost first */
    int32_t wide;          /* M or R >= 2^31: 64-bit division */
    int32_t vec;           /* reduced innermost stride 1, aligned: vector loads */
    int64_t kept_sizes[OD_CU_MAX_DIMS], kept_bstrides[OD_CU_MAX_DIMS];
    FastDiv kept_div[OD_CU_MAX_DIMS];
    int64_t red_sizes[OD_CU_MAX_DIMS], red_bstrides[OD_CU_MAX_DIMS];
    FastDiv red_div[OD_CU_MAX_DIMS];
    int64_t m, r;
    int64_t chunk;         /* reduced elements per grid.y slice (a multiple of the vector width) */
};

__device__ __forceinline__ int64_t offset_of(int64_t idx, int n, const int64_t *sizes,
                                             const int64_t *bstrides, const FastDiv *div, bool wide)
{
    int64_t off = 0;
#pragma unroll
    for (int d = 0; d < OD_CU_MAX_DIMS; d++) {
        if (d == n)
            break;
        int64_t q = wide ? idx / sizes[d] : (int64_t)div[d].div((uint32_t)idx);
        off += (idx - q * sizes[d]) * bstrides[d];
        idx = q;
    }
    return off;
}

/* Merge across the L lanes of a row; the result is valid in lane 0. */
template <class Op>
__device__ __forceinline__ typename Op::acc_t lanes_merge(const Op &op, typename Op::acc_t acc, int L)
{
    using acc_t = typename Op::acc_t;
    __shared__ acc_t sm[8];
    const int width = L < 32 ? L : 32;
    for (int d = width / 2; d > 0; d >>= 1)
        acc = op.merge(acc, shfl_down_any(acc, d, width));
    if (L > 32) {
        const int wpr = L / 32;                   /* warps per row */
        const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
        if (lane == 0)
            sm[threadIdx.y * wpr + w] = acc;
        __syncthreads();
        if (threadIdx.x == 0)
            for (int k = 1; k < wpr; k++)
                acc = op.merge(acc, sm[threadIdx.y * wpr + k]);
        __syncthreads();
    }
    return acc;
}

template <class Op, typename S> __global__ void __launch_bounds__(256) reduce_kernel(const RedParams p, const Op op)
{
    using acc_t = typename Op::acc_t;
    using A = typename Op::in_t;
    constexpr int V = 16 / sizeof(S) > 8 ? 8 : 16 / sizeof(S);
    const int L = blockDim.x, Y = blockDim.y;
    const int G = gridDim.y;
    const int64_t r0 = (int64_t)blockIdx.y * p.chunk;
    const int64_t r1 = r0 + p.chunk < p.r ? r0 + p.chunk : p.r;
    for (int64_t ob = (int64_t)blockIdx.x * Y; ob < p.m; ob += (int64_t)gridDim.x * Y) {
        const int64_t o = ob + threadIdx.y;
        acc_t acc = op.init();
        if (o < p.m) {
            const char *base = p.in + offset_of(o, p.nkept, p.kept_sizes, p.kept_bstrides, p.kept_div, p.wide);
            if (p.vec) {
                /* Reduced elements are contiguous: vectors, then the scalar tail. */
                const int64_t nv = (r1 - r0) / V;
                const Vec<S, V> *vp = reinterpret_cast<const Vec<S, V> *>(base + r0 * (int64_t)sizeof(S));
#pragma unroll 4
                for (int64_t k = threadIdx.x; k < nv; k += L) {
                    Vec<S, V> x = vp[k];
#pragma unroll
                    for (int e = 0; e < V; e++)
                        acc = op.reduce(acc, to_c<A>(x.v[e]), r0 + k * V + e);
                }
                for (int64_t r = r0 + nv * V + threadIdx.x; r < r1; r += L)
                    acc = op.reduce(acc, to_c<A>(((const S *)base)[r]), r);
            } else if (p.nred == 1) {
                const int64_t bs = p.red_bstrides[0];
                for (int64_t r = r0 + threadIdx.x; r < r1; r += L)
                    acc = op.reduce(acc, to_c<A>(*(const S *)(base + r * bs)), r);
            } else {
                for (int64_t r = r0 + threadIdx.x; r < r1; r += L) {
                    int64_t off = offset_of(r, p.nred, p.red_sizes, p.red_bstrides, p.red_div, p.wide);
                    acc = op.reduce(acc, to_c<A>(*(const S *)(base + off)), r);
                }
            }
        }
        acc = lanes_merge(op, acc, L);
        if (o < p.m && threadIdx.x == 0) {
            if (G == 1)
                op.store(p.out + o * p.out_es, p.out_dtype, acc);
            else
                ((acc_t *)p.ws)[o * G + blockIdx.y] = acc;
        }
    }
}

/* One warp per output merges its G partials. */
template <class Op> __global__ void __launch_bounds__(256) reduce_finish(const RedParams p, const Op op, int G)
{
    using acc_t = typename Op::acc_t;
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t o = (int64_t)blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5); o < p.m; o += warps) {
        acc_t acc = op.init();
        for (int g = lane; g < G; g += 32)
            acc = op.merge(acc, ((const acc_t *)p.ws)[o * G + g]);
        for (int d = 16; d > 0; d >>= 1)
            acc = op.merge(acc, shfl_down_any(acc, d));
        if (lane == 0)
            op.store(p.out + o * p.out_es, p.out_dtype, acc);
    }
}

/* ---- launch ---------------------------------------------------------------------------------- */

static int next_pow2(int64_t x)
{
    int p = 1;
    while (p < x && p < (1 << 30))
        p <<= 1;
    return p;
}

struct Plan {
    RedParams p;
    int L, G;
    unsigned gx;
};

template <class Op> static size_t acc_size() { return sizeof(typename Op::acc_t); }

static void make_plan(const od_cu_reduce_args *a, int in_es, Plan *pl)
{
    RedParams &p = pl->p;
    memset(&p, 0, sizeof p);
    p.in = (const char *)a->in;
    p.out = (char *)a->out;
    p.out_dtype = a->out_dtype;
    p.out_es = dtype_size(a->out_dtype);
    p.nkept = a->nkept;
    p.nred = a->nred;
    p.m = a->m;
    p.r = a->r;
    p.wide = a->m > INT32_MAX || a->r > INT32_MAX;
    for (int d = 0; d < a->nkept; d++) {
        int src = a->nkept - 1 - d;
        p.kept_sizes[d] = a->kept_sizes[src];
        p.kept_bstrides[d] = a->kept_strides[src] * in_es;
        p.kept_div[d] = FastDiv(a->kept_sizes[src] <= INT32_MAX ? (uint32_t)a->kept_sizes[src] : 1u);
    }
    for (int d = 0; d < a->nred; d++) {
        int src = a->nred - 1 - d;
        p.red_sizes[d] = a->red_sizes[src];
        p.red_bstrides[d] = a->red_strides[src] * in_es;
        p.red_div[d] = FastDiv(a->red_sizes[src] <= INT32_MAX ? (uint32_t)a->red_sizes[src] : 1u);
    }
    const int V = 16 / in_es > 8 ? 8 : 16 / in_es;
    bool inner_contig = a->nred >= 1 && a->red_strides[a->nred - 1] == 1;
    bool vec = a->nred == 1 && inner_contig && ((uintptr_t)a->in & 15u) == 0;
    for (int d = 0; vec && d < a->nkept; d++)
        vec = (a->kept_strides[d] * in_es) % 16 == 0;
    p.vec = vec;
    const int W = vec ? V : 1;
    int L;
    if (inner_contig) {
        int64_t want = (a->r + 4 * W - 1) / (4 * W);
        L = next_pow2(want < 1 ? 1 : want);
        if (L > 256)
            L = 256;
    } else if (a->m >= (int64_t)a->sm_count * 256) {
        L = 1;
    } else {
        int64_t want = (a->r + 3) / 4;
        L = next_pow2(want < 1 ? 1 : want);
        if (L > 32)
            L = 32;
    }
    const int Y = 256 / L;
    int64_t blocks_m = (a->m + Y - 1) / Y;
    int64_t target = (int64_t)a->sm_count * 8;
    int64_t G = 1;
    if (blocks_m < target && a->r > 0) {
        G = (target + blocks_m - 1) / blocks_m;
        int64_t gmax = (a->r + (int64_t)L * W * 8 - 1) / ((int64_t)L * W * 8);
        if (G > gmax)
            G = gmax;
        if (G > 1024)
            G = 1024;
        if (G < 1)
            G = 1;
    }
    int64_t chunk = (a->r + G - 1) / G;
    chunk = (chunk + W - 1) / W * W;
    if (chunk < 1)
        chunk = 1;
    G = (a->r + chunk - 1) / chunk;
    if (G < 1)
        G = 1;
    p.chunk = chunk;
    int64_t gx = blocks_m < (int64_t)a->sm_count * 32 ? blocks_m : (int64_t)a->sm_count * 32;
    pl->gx = gx < 1 ? 1u : (unsigned)gx;
    pl->L = L;
    pl->G = (int)G;
}

template <class Op, typename S> static cudaError_t run(const od_cu_reduce_args *a, void *ws, cudaStream_t st, Op op)
{
    Plan pl;
    make_plan(a, (int)sizeof(S), &pl);
    pl.p.ws = ws;
    op.correction = a->correction;
    op.count = a->r;
    dim3 block(pl.L, 256 / pl.L);
    dim3 grid(pl.gx, pl.G);
    reduce_kernel<Op, S><<<grid, block, 0, st>>>(pl.p, op);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || pl.G == 1)
        return e;
    reduce_finish<Op><<<grid_for(a->m * 32, 256, a->sm_count, 8), 256, 0, st>>>(pl.p, op, pl.G);
    return cudaGetLastError();
}

template <class Op> static size_t ws_bytes(const od_cu_reduce_args *a, int in_es)
{
    Plan pl;
    make_plan(a, in_es, &pl);
    return pl.G > 1 ? (size_t)a->m * (size_t)pl.G * acc_size<Op>() : 0;
}

/* Calls F<S>() with the storage type of dt. */
#define OD_RED_SWITCH_(dt, CALL)                                  \
    switch (dt) {                                                 \
    case OD_CU_BOOL: { using S = uint8_t; CALL; }                 \
    case OD_CU_UINT8: { using S = uint8_t; CALL; }                \
    case OD_CU_INT8: { using S = int8_t; CALL; }                  \
    case OD_CU_INT16: { using S = int16_t; CALL; }                \
    case OD_CU_INT32: { using S = int32_t; CALL; }                \
    case OD_CU_INT64: { using S = int64_t; CALL; }                \
    case OD_CU_FLOAT16: { using S = half_t; CALL; }               \
    case OD_CU_BFLOAT16: { using S = bf16_t; CALL; }              \
    case OD_CU_FLOAT32: { using S = float; CALL; }                \
    case OD_CU_FLOAT64: { using S = double; CALL; }               \
    default: break;                                               \
    }

/* The operation type for (kind, accumulation family); calls BODY with Op. */
template <typename F> static cudaError_t with_op(int kind, int fam, F &&body)
{
    switch (kind) {
    case OD_CU_RED_SUM:
        if (fam == FAM_F32) return body(SumOp<float, false>{});
        if (fam == FAM_F64) return body(SumOp<double, false>{});
        return body(SumOp<int64_t, false>{});
    case OD_CU_RED_MEAN:
        if (fam == FAM_F32) return body(SumOp<float, true>{});
        if (fam == FAM_F64) return body(SumOp<double, true>{});
        return cudaErrorNotSupported;
    case OD_CU_RED_AMAX:
        if (fam == FAM_F32) return body(MinMaxOp<float, true>{});
        if (fam == FAM_F64) return body(MinMaxOp<double, true>{});
        return body(MinMaxOp<int64_t, true>{});
    case OD_CU_RED_AMIN:
        if (fam == FAM_F32) return body(MinMaxOp<float, false>{});
        if (fam == FAM_F64) return body(MinMaxOp<double, false>{});
        return body(MinMaxOp<int64_t, false>{});
    case OD_CU_RED_ARGMAX:
        if (fam == FAM_F32) return body(ArgMaxOp<float, true>{});
        if (fam == FAM_F64) return body(ArgMaxOp<double, true>{});
        return body(ArgMaxOp<int64_t, true>{});
    case OD_CU_RED_ARGMIN:
        if (fam == FAM_F32) return body(ArgMaxOp<float, false>{});
        if (fam == FAM_F64) return body(ArgMaxOp<double, false>{});
        return body(ArgMaxOp<int64_t, false>{});
    case OD_CU_RED_PROD:
        if (fam == FAM_F32) return body(ProdOp<float>{});
        if (fam == FAM_F64) return body(ProdOp<double>{});
        return body(ProdOp<int64_t>{});
    case OD_CU_RED_VAR:
        if (fam == FAM_F32) return body(VarOp<float>{});
        if (fam == FAM_F64) return body(VarOp<double>{});
        return cudaErrorNotSupported;
    default: return cudaErrorNotSupported;
    }
}

/* sum/mean accumulate in the output's family; the others in the input's. */
static int acc_family(const od_cu_reduce_args *a)
{
    return a->kind == OD_CU_RED_SUM || a->kind == OD_CU_RED_MEAN || a->kind == OD_CU_RED_PROD
               ? family_of(a->out_dtype)
                                                                 : family_of(a->in_dtype);
}

} // namespace

extern "C" size_t od_cu_reduce_workspace(const od_cu_reduce_args *a)
{
    if (a->m <= 0)
        return 0;
    size_t out = 0;
    int es = dtype_size(a->in_dtype);
    with_op(a->kind, acc_family(a), [&](auto op) {
        out = ws_bytes<decltype(op)>(a, es);
        return cudaSuccess;
    });
    return out;
}

extern "C" cudaError_t od_cu_reduce(const od_cu_reduce_args *a, void *ws, cudaStream_t st)
{
    if (a->m <= 0)
        return cudaSuccess;
    return with_op(a->kind, acc_family(a), [&](auto op) -> cudaError_t {
        using Op = decltype(op);
        OD_RED_SWITCH_(a->in_dtype, return (run<Op, S>(a, ws, st, op)));
        return cudaErrorNotSupported;
    });
}
