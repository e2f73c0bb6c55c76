/* scan.cu — cumsum, cumprod, logcumsumexp, cummax, cummin, and the per-line
 * sort serving sort, sort.stable, topk and kthvalue.
 *
 * Invariants:
 *  - Inputs are contiguous [outer, size, inner] (the boxed kernels copy and
 *    cast first); outputs are contiguous, of the same layout ([outer, on,
 *    inner] for the sort family).
 *  - Scans: lines along the last dim of at least one block's width run
 *    chunked (cum_chunked: three passes, a block per chunk); the rest one
 *    thread per line (outer * inner lines; consecutive threads read
 *    consecutive addresses when inner > 1), in order. Both are
 *    deterministic; the chunked order of additions is not the CPU's.
 *  - Accumulation follows the CPU kernels (ATen's CPU acc_type), which are
 *    the reference: double for float32 and float64, float for float16 and
 *    bfloat16, int64 for integers (wrapping through uint64_t).
 *  - cummax/cummin and the sort compare keys (double for floats, int64 for
 *    integers and bool: both exact) and copy the chosen element's bytes, so
 *    NaN payloads survive. NaN is the largest key.
 *  - The sort family is CUB's stable radix sort (segmented, or line by line
 *    for long lines) on order-preserving integer keys, as torch's CUDA sort: equal keys keep their input order,
 *    which is the CPU's for sort(stable=True) and one valid order otherwise
 *    (the CPU's introsort, partial_sort and quick-select order ties their
 *    own way, as torch's CPU and CUDA kernels differ too). topk always
 *    comes out sorted.
 */
#include "cu_common.cuh"
#include "od_sort_algo.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

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

/* Long lines along the last dim (inner == 1): chunks of CT * CI elements,
 * one block each. Pass 1 reduces each chunk, pass 2 scans the chunk totals
 * of each line (exclusive), pass 3 scans each chunk from its line's prefix.
 * The accumulator is the per-line kernels' (A: double, float, or uint64_t
 * wrapping for integers); the order of additions differs from the CPU's
 * sequential one, so floats round differently (as torch's CUDA scan's do). */
constexpr int CT = 256, CI = 8, CH = CT * CI;

template <typename A> struct cum_comb {
    int op;
    __device__ __forceinline__ A operator()(const A &a, const A &b) const
    {
        if constexpr (std::is_integral_v<A>)
            return op == OD_CU_SCAN_CUMPROD ? a * b : a + b;
        else
            return op == OD_CU_SCAN_CUMPROD ? a * b : op == OD_CU_SCAN_CUMSUM ? a + b : log_add_exp(b, a);
    }
};

template <typename A> __device__ __forceinline__ A cum_identity(int op)
{
    if constexpr (std::is_integral_v<A>)
        return op == OD_CU_SCAN_CUMPROD ? (A)1 : (A)0;
    else
        return op == OD_CU_SCAN_CUMPROD ? (A)1 : op == OD_CU_SCAN_CUMSUM ? (A)0 : -(A)INFINITY;
}

template <typename A> __device__ __forceinline__ A cum_load(const char *p, int dt)
{
    if constexpr (std::is_integral_v<A>)
        return (A)load_dyn<int64_t>(p, dt);
    else
        return load_dyn<A>(p, dt);
}

template <typename A> __device__ __forceinline__ void cum_store(char *p, int dt, A v)
{
    if constexpr (std::is_integral_v<A>)
        store_dyn<int64_t>(p, dt, (int64_t)v);
    else
        store_dyn<A>(p, dt, v);
}

template <typename A>
__global__ void __launch_bounds__(CT) cum_chunk_reduce(const char *x, int dt, int op, int64_t size, int64_t nch,
                                                      int64_t blocks, A *part)
{
    typedef cub::BlockReduce<A, CT> reduce_t;
    __shared__ typename reduce_t::TempStorage tmp;
    const int es = dtype_size(dt);
    const cum_comb<A> comb{op};
    for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
        const int64_t l = b / nch, c = b - l * nch;
        A acc = cum_identity<A>(op);
        for (int i = 0; i < CI; i++) {
            const int64_t k = c * CH + (int64_t)i * CT + threadIdx.x;
            if (k < size)
                acc = comb(acc, cum_load<A>(x + (l * size + k) * es, dt));
        }
        A r = reduce_t(tmp).Reduce(acc, comb);
        if (threadIdx.x == 0)
            part[b] = r;
        __syncthreads();
    }
}

/* Pass 2: one block per line scans its chunk totals, CT at a time. */
template <typename A> __global__ void __launch_bounds__(CT) cum_parts_scan(A *part, int op, int64_t lines, int64_t nch)
{
    typedef cub::BlockScan<A, CT> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    __shared__ A carry_s;
    const cum_comb<A> comb{op};
    for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
        A carry = cum_identity<A>(op);
        for (int64_t c0 = 0; c0 < nch; c0 += CT) {
            const int64_t c = c0 + threadIdx.x;
            A t = c < nch ? part[l * nch + c] : cum_identity<A>(op), excl, total;
            scan_t(tmp).ExclusiveScan(t, excl, cum_identity<A>(op), comb, total);
            if (c < nch)
                part[l * nch + c] = comb(carry, excl);
            if (threadIdx.x == 0)
                carry_s = comb(carry, total);
            __syncthreads();
            carry = carry_s;
            __syncthreads();
        }
    }
}

template <typename A>
__global__ void __launch_bounds__(CT) cum_chunk_scan(const char *x, char *y, int dt, int op, int64_t size,
                                                    int64_t nch, int64_t blocks, const A *part)
{
    typedef cub::BlockScan<A, CT> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    const int es = dtype_size(dt);
    const cum_comb<A> comb{op};
    for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
        const int64_t l = b / nch, c = b - l * nch, k0 = c * CH + (int64_t)threadIdx.x * CI;
        A v[CI], run = cum_identity<A>(op);
        for (int i = 0; i < CI; i++) {
            if (k0 + i < size)
                run = comb(run, cum_load<A>(x + (l * size + k0 + i) * es, dt));
            v[i] = run;
        }
        A excl;
        scan_t(tmp).ExclusiveScan(run, excl, cum_identity<A>(op), comb);
        __syncthreads();
        const A base = nch > 1 ? comb(part[b], excl) : excl;
        for (int i = 0; i < CI && k0 + i < size; i++)
            cum_store<A>(y + (l * size + k0 + i) * es, dt, comb(base, v[i]));
    }
}

template <typename A>
static cudaError_t cum_chunked(const char *x, char *y, int dt, int op, int64_t lines, int64_t size, void *scratch,
                               int sm_count, cudaStream_t st)
{
    const int64_t nch = (size + CH - 1) / CH, blocks = lines * nch;
    const unsigned g = (unsigned)std::min<int64_t>(blocks, (int64_t)sm_count * 16);
    A *part = (A *)scratch;
    if (nch > 1) {
        cum_chunk_reduce<A><<<g, CT, 0, st>>>(x, dt, op, size, nch, blocks, part);
        cum_parts_scan<A><<<(unsigned)std::min<int64_t>(lines, (int64_t)sm_count * 16), CT, 0, st>>>(part, op, lines,
                                                                                                    nch);
    }
    cum_chunk_scan<A><<<g, CT, 0, st>>>(x, y, dt, op, size, nch, blocks, part);
    return cudaGetLastError();
}

/* The chunked path serves cumsum, cumprod and logcumsumexp along the last
 * dim of lines long enough to fill a block; the per-line kernels the rest. */
static bool use_chunked(int op, int64_t size, int64_t inner)
{
    return inner == 1 && size >= CT && op != OD_CU_SCAN_CUMMAX && op != OD_CU_SCAN_CUMMIN;
}

static size_t acc_size(int dtype)
{
    return dtype == OD_CU_FLOAT16 || dtype == OD_CU_BFLOAT16 ? sizeof(float)
                                                            : dtype == OD_CU_FLOAT32 || dtype == OD_CU_FLOAT64
                                                                  ? sizeof(double)
                                                                  : sizeof(uint64_t);
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

/* The sort family: each line's elements become (key, position) pairs, the
 * keys unsigned integers in the comparator's order (NaN the largest, -0 equal
 * to +0, descending as the complement), sorted by CUB's stable segmented
 * radix sort, and the entries that go out gathered back into [outer, on,
 * inner]. K is 32 bits wide for dtypes of up to 4 bytes, else 64. */
template <typename K> __device__ __forceinline__ K sort_key(const char *p, int dt, bool desc)
{
    K key;
    if constexpr (sizeof(K) == 4) {
        if (is_float_dt(dt)) {
            float f = load_dyn<float>(p, dt);
            uint32_t b = f != f ? 0xffffffffu : __float_as_uint(f == 0.0f ? 0.0f : f);
            key = f != f ? b : (b & 0x80000000u) ? ~b : (b | 0x80000000u);
        } else {
            key = (uint32_t)(int32_t)load_dyn<int64_t>(p, dt) ^ 0x80000000u;
        }
    } else {
        if (is_float_dt(dt)) {
            double f = load_dyn<double>(p, dt);
            uint64_t b = f != f ? ~0ull : (uint64_t)__double_as_longlong(f == 0.0 ? 0.0 : f);
            key = f != f ? b : (b >> 63) ? ~b : (b | (1ull << 63));
        } else {
            key = (uint64_t)load_dyn<int64_t>(p, dt) ^ (1ull << 63);
        }
    }
    return desc ? (K)~key : key;
}

template <typename K>
__global__ void __launch_bounds__(256) sort_pairs_in(const char *x, int dt, int64_t size, int64_t inner,
                                                     int64_t total, int desc, K *keys, int64_t *pos,
                                                     int64_t *offs)
{
    const int es = dtype_size(dt);
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t l = e / size, q = e - l * size, o = l / inner, j = l - o * inner;
        keys[e] = sort_key<K>(x + ((o * size + q) * inner + j) * es, dt, desc);
        pos[e] = q;
        if (q == 0)
            offs[l] = e;
        if (e == total - 1)
            offs[l + 1] = total;
    }
}

__global__ void __launch_bounds__(256) sort_gather(const char *x, const int64_t *sorted, char *vals, int64_t *ix,
                                                   int es, int64_t size, int64_t inner, int64_t on,
                                                   int64_t first, int64_t total)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t l = e / on, q = e - l * on, o = l / inner, j = l - o * inner;
        const int64_t src = sorted[l * size + first + q];
        ix[(o * on + q) * inner + j] = src;
        copy_elem(vals + ((o * on + q) * inner + j) * es, x + ((o * size + src) * inner + j) * es, es);
    }
}

/* Lines this long are sorted one at a time by CUB's radix sort (stable, and
 * many times faster than the segmented sort on a few huge segments). */
constexpr int64_t LONG_LINE = 1 << 16;

/* Scratch layout: keys in and out, positions in and out, lines + 1 offsets,
 * then CUB's temporary storage; every part 256-byte aligned. */
struct sort_plan {
    size_t keys, pos, offs, cub, total;
};

static size_t align256(size_t b)
{
    return (b + 255) & ~(size_t)255;
}

template <typename K> static cudaError_t plan_sort(int64_t lines, int64_t size, sort_plan *p)
{
    const int64_t n = lines * size;
    p->keys = align256((size_t)n * sizeof(K));
    p->pos = align256((size_t)n * sizeof(int64_t));
    p->offs = align256((size_t)(lines + 1) * sizeof(int64_t));
    p->cub = 0;
    cudaError_t e =
        size >= LONG_LINE
            ? cub::DeviceRadixSort::SortPairs(nullptr, p->cub, (const K *)nullptr, (K *)nullptr,
                                              (const int64_t *)nullptr, (int64_t *)nullptr, size)
            : cub::DeviceSegmentedSort::StableSortPairs(nullptr, p->cub, (const K *)nullptr, (K *)nullptr,
                                                        (const int64_t *)nullptr, (int64_t *)nullptr, n, lines,
                                                        (const int64_t *)nullptr, (const int64_t *)nullptr + 1);
    p->total = 2 * p->keys + 2 * p->pos + p->offs + align256(p->cub);
    return e;
}

template <typename K>
static cudaError_t run_sort(const char *x, char *vals, int64_t *ix, int dt, int op, int64_t outer, int64_t size,
                            int64_t inner, int64_t k, bool desc, char *scratch, int sm_count, cudaStream_t st)
{
    const int64_t lines = outer * inner, n = lines * size;
    sort_plan p;
    cudaError_t e = plan_sort<K>(lines, size, &p);
    if (e != cudaSuccess)
        return e;
    K *kin = (K *)scratch, *kout = (K *)(scratch + p.keys);
    int64_t *pin = (int64_t *)(scratch + 2 * p.keys), *pout = (int64_t *)(scratch + 2 * p.keys + p.pos);
    int64_t *offs = (int64_t *)(scratch + 2 * p.keys + 2 * p.pos);
    void *tmp = scratch + 2 * p.keys + 2 * p.pos + p.offs;
    /* kthvalue is the k-th smallest; topk's largest and sort's descending
     * order the keys downwards */
    const bool down = op != OD_SORT_OP_KTHVALUE && desc;
    sort_pairs_in<K><<<grid_for(n, 256, sm_count, 8), 256, 0, st>>>(x, dt, size, inner, n, down, kin, pin, offs);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    if (size >= LONG_LINE) {
        for (int64_t l = 0; l < lines; l++) {
            size_t bytes = p.cub;
            if ((e = cub::DeviceRadixSort::SortPairs(tmp, bytes, kin + l * size, kout + l * size, pin + l * size,
                                                     pout + l * size, size, 0, (int)sizeof(K) * 8, st)) !=
                cudaSuccess)
                return e;
        }
    } else if ((e = cub::DeviceSegmentedSort::StableSortPairs(tmp, p.cub, kin, kout, pin, pout, n, lines, offs,
                                                              offs + 1, st)) != cudaSuccess) {
        return e;
    }
    const int64_t on = op == OD_SORT_OP_TOPK ? k : op == OD_SORT_OP_KTHVALUE ? 1 : size;
    const int64_t first = op == OD_SORT_OP_KTHVALUE ? k - 1 : 0;
    if (on * lines > 0)
        sort_gather<<<grid_for(on * lines, 256, sm_count, 8), 256, 0, st>>>(x, pout, vals, ix, dtype_size(dt), size,
                                                                          inner, on, first, on * lines);
    return cudaGetLastError();
}

/* median, nanmedian, mode: a thread per line replays the CPU kernel's
 * selection (od_sort_algo.h, device-callable, no allocation, no recursion)
 * on the line's (key, index) pairs in scratch, so the value and the index
 * of a tie are the CPU's. One line runs serially: median() of a large
 * tensor is one thread's work (correct, not fast). */
__global__ void __launch_bounds__(128) select_lines(const char *x, int dt, int op, int64_t size, int64_t inner,
                                                    int64_t lines, od_sort_elem *buf, char *vals, int64_t *ix)
{
    const int es = dtype_size(dt);
    const bool fl = is_float_dt(dt);
    for (int64_t l = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; l < lines;
         l += (int64_t)gridDim.x * blockDim.x) {
        const int64_t o = l / inner, j = l - o * inner;
        od_sort_elem *f = buf + l * 2 * size;
        for (int64_t q = 0; q < size; q++) {
            const char *p = x + ((o * size + q) * inner + j) * es;
            if (fl)
                f[q].k.d = load_dyn<double>(p, dt);
            else
                f[q].k.i = load_dyn<int64_t>(p, dt);
            f[q].idx = q;
        }
        const od_sort_elem *e = &f[od_sort_line(f, f + size, size, op, 0, false, false, fl)];
        const int64_t src = e->idx;
        if (op == OD_SORT_OP_MEDIAN_ALL && fl && isnan(e->k.d)) /* ATen's quiet_NaN(), as the CPU's */
            store_dyn<double>(vals + l * es, dt, NAN);
        else
            copy_elem(vals + l * es, x + ((o * size + src) * inner + j) * es, es);
        if (ix)
            ix[l] = src;
    }
}

/* isin: keys are sort_key's 64-bit order-preserving integers of values
 * already in the common dtype (-0.0 and 0.0 one key, every NaN the largest),
 * so equal keys are equal values except NaN, which is never found. */
__global__ void __launch_bounds__(256) isin_keys(const char *x, int dt, int64_t n, uint64_t *keys, int64_t *pos,
                                                 int64_t base)
{
    const int es = dtype_size(dt);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        keys[i] = sort_key<uint64_t>(x + i * es, dt, false);
        if (pos)
            pos[i] = base + i;
    }
}

__device__ __forceinline__ bool isin_nan(const char *p, int dt)
{
    return is_float_dt(dt) && isnan(load_dyn<double>(p, dt));
}

/* Plain membership: a binary search of each element's key among the m
 * sorted test keys. */
__global__ void __launch_bounds__(256) isin_search(const char *e, int dt, int64_t n, const uint64_t *sorted,
                                                   int64_t m, bool invert, bool *out)
{
    const int es = dtype_size(dt);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const char *p = e + i * es;
        const uint64_t k = sort_key<uint64_t>(p, dt, false);
        int64_t lo = 0, hi = m;
        while (lo < hi) {
            const int64_t mid = lo + ((hi - lo) >> 1);
            if (sorted[mid] < k)
                lo = mid + 1;
            else
                hi = mid;
        }
        const bool found = !isin_nan(p, dt) && lo < m && sorted[lo] == k;
        out[i] = found != invert;
    }
}

/* ATen's isin_sorting with assume_unique, as the CPU replays it: in the
 * stable order of cat(elements, test), each element is equal (!=, invert)
 * to its successor; the last one answers invert. Values compare by ==
 * (NaN unequal), read back through the sorted positions. */
__global__ void __launch_bounds__(256) isin_sorted(const char *e, const char *t, int dt, int64_t n, int64_t all,
                                                   const int64_t *pos, bool invert, bool *out)
{
    const int es = dtype_size(dt);
    const bool fl = is_float_dt(dt);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < all; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t a = pos[i];
        if (a >= n)
            continue;
        bool v = invert;
        if (i + 1 < all) {
            const int64_t b = pos[i + 1];
            const char *pa = e + a * es, *pb = b < n ? e + b * es : t + (b - n) * es;
            const bool eq = fl ? load_dyn<double>(pa, dt) == load_dyn<double>(pb, dt)
                               : load_dyn<int64_t>(pa, dt) == load_dyn<int64_t>(pb, dt);
            v = invert ? !eq : eq;
        }
        out[a] = v;
    }
}

/* isin's scratch: keys in and out, positions in and out (the sorted replay
 * only), then CUB's temporary storage; each part 256-byte aligned. */
struct isin_plan {
    size_t keys, pos, cub, total;
};

static cudaError_t plan_isin(int64_t count, bool replay, isin_plan *p)
{
    p->keys = align256((size_t)count * sizeof(uint64_t));
    p->pos = replay ? align256((size_t)count * sizeof(int64_t)) : 0;
    p->cub = 0;
    cudaError_t e = replay ? cub::DeviceRadixSort::SortPairs(nullptr, p->cub, (const uint64_t *)nullptr,
                                                             (uint64_t *)nullptr, (const int64_t *)nullptr,
                                                             (int64_t *)nullptr, count)
                           : cub::DeviceRadixSort::SortKeys(nullptr, p->cub, (const uint64_t *)nullptr,
                                                            (uint64_t *)nullptr, count);
    p->total = 2 * p->keys + 2 * p->pos + align256(p->cub);
    return e;
}

} // namespace

extern "C" size_t od_cu_select_scratch(int64_t outer, int64_t size, int64_t inner)
{
    if (outer <= 0 || size <= 0 || inner <= 0)
        return 0;
    return (size_t)outer * (size_t)inner * (size_t)size * 2 * sizeof(od_sort_elem);
}

extern "C" cudaError_t od_cu_select(const void *x, void *vals, int64_t *ix, int dtype, int op, int64_t outer,
                                    int64_t size, int64_t inner, void *scratch, int sm_count, cudaStream_t st)
{
    const int64_t lines = outer * inner;
    if (lines <= 0 || size <= 0)
        return cudaSuccess;
    select_lines<<<grid_for(lines, 128, sm_count, 8), 128, 0, st>>>((const char *)x, dtype, op, size, inner, lines,
                                                                     (od_sort_elem *)scratch, (char *)vals, ix);
    return cudaGetLastError();
}

extern "C" size_t od_cu_isin_scratch(int64_t n, int64_t m, bool replay)
{
    isin_plan p;
    if (n <= 0 || plan_isin(replay ? n + m : m, replay, &p) != cudaSuccess)
        return 0;
    return p.total ? p.total : 256; /* no test elements may need none: 0 says "cannot plan" */
}

extern "C" cudaError_t od_cu_isin(const void *e, int64_t n, const void *t, int64_t m, int dtype, bool replay,
                                  bool invert, bool *out, void *scratch, int sm_count, cudaStream_t st)
{
    if (n <= 0)
        return cudaSuccess;
    const int64_t count = replay ? n + m : m;
    isin_plan p;
    cudaError_t err = plan_isin(count, replay, &p);
    if (err != cudaSuccess)
        return err;
    char *s = (char *)scratch;
    uint64_t *kin = (uint64_t *)s, *kout = (uint64_t *)(s + p.keys);
    int64_t *pin = (int64_t *)(s + 2 * p.keys), *pout = (int64_t *)(s + 2 * p.keys + p.pos);
    void *tmp = s + 2 * p.keys + 2 * p.pos;
    if (!replay) {
        if (m > 0) {
            isin_keys<<<grid_for(m, 256, sm_count, 8), 256, 0, st>>>((const char *)t, dtype, m, kin, nullptr, 0);
            if ((err = cudaGetLastError()) != cudaSuccess ||
                (err = cub::DeviceRadixSort::SortKeys(tmp, p.cub, kin, kout, m, 0, 64, st)) != cudaSuccess)
                return err;
        }
        isin_search<<<grid_for(n, 256, sm_count, 8), 256, 0, st>>>((const char *)e, dtype, n, kout, m, invert, out);
        return cudaGetLastError();
    }
    /* cat(elements, test)'s keys and positions, then CUB's radix sort, which is stable */
    isin_keys<<<grid_for(n, 256, sm_count, 8), 256, 0, st>>>((const char *)e, dtype, n, kin, pin, 0);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;
    if (m > 0) {
        isin_keys<<<grid_for(m, 256, sm_count, 8), 256, 0, st>>>((const char *)t, dtype, m, kin + n, pin + n, n);
        if ((err = cudaGetLastError()) != cudaSuccess)
            return err;
    }
    if ((err = cub::DeviceRadixSort::SortPairs(tmp, p.cub, kin, kout, pin, pout, count, 0, 64, st)) != cudaSuccess)
        return err;
    isin_sorted<<<grid_for(count, 256, sm_count, 8), 256, 0, st>>>((const char *)e, (const char *)t, dtype, n, count,
                                                                   pout, invert, out);
    return cudaGetLastError();
}

extern "C" size_t od_cu_scan_scratch(int dtype, int op, int64_t outer, int64_t size, int64_t inner)
{
    if (outer <= 0 || size <= 0 || !use_chunked(op, size, inner))
        return 0;
    return (size_t)outer * (size_t)((size + CH - 1) / CH) * acc_size(dtype);
}

extern "C" cudaError_t od_cu_scan(const void *x, void *y, int64_t *ix, int dtype, int op, int64_t outer,
                                  int64_t size, int64_t inner, void *scratch, int sm_count, cudaStream_t st)
{
    const int64_t lines = outer * inner;
    if (lines <= 0 || size <= 0)
        return cudaSuccess;
    if (use_chunked(op, size, inner)) {
        const char *xc = (const char *)x;
        char *yc = (char *)y;
        if (dtype == OD_CU_FLOAT64 || dtype == OD_CU_FLOAT32)
            return cum_chunked<double>(xc, yc, dtype, op, lines, size, scratch, sm_count, st);
        if (dtype == OD_CU_FLOAT16 || dtype == OD_CU_BFLOAT16)
            return cum_chunked<float>(xc, yc, dtype, op, lines, size, scratch, sm_count, st);
        if (op == OD_CU_SCAN_LOGCUMSUMEXP)
            return cudaErrorNotSupported;
        return cum_chunked<uint64_t>(xc, yc, dtype, op, lines, size, scratch, sm_count, st);
    }
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

extern "C" size_t od_cu_sort_scratch(int dtype, int64_t outer, int64_t size, int64_t inner)
{
    if (outer <= 0 || size <= 0 || inner <= 0)
        return 0;
    sort_plan p;
    cudaError_t e = dtype_size(dtype) <= 4 ? plan_sort<uint32_t>(outer * inner, size, &p)
                                           : plan_sort<uint64_t>(outer * inner, size, &p);
    return e == cudaSuccess ? p.total : 0;
}

extern "C" cudaError_t od_cu_sort(const void *x, void *vals, int64_t *ix, int dtype, int op, int64_t outer,
                                  int64_t size, int64_t inner, int64_t k, bool descending, bool sorted,
                                  void *scratch, int sm_count, cudaStream_t st)
{
    (void)sorted; /* the entries always come out sorted: what sorted=True asks, and allowed otherwise */
    if (outer * inner <= 0 || size <= 0)
        return cudaSuccess;
    if (dtype_size(dtype) <= 4)
        return run_sort<uint32_t>((const char *)x, (char *)vals, ix, dtype, op, outer, size, inner, k, descending,
                                  (char *)scratch, sm_count, st);
    return run_sort<uint64_t>((const char *)x, (char *)vals, ix, dtype, op, outer, size, inner, k, descending,
                              (char *)scratch, sm_count, st);
}
