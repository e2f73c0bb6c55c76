/* misc.cu — the elementwise entry point, fill, factories (arange, random)
 * and index_select.
 *
 * Invariants: as cuda_kernels.h states — enqueue only, report launch errors,
 * data-dependent errors through the caller's flag. Random numbers come from
 * od_math_random_f64 (Philox, counter = offset + element index), so the
 * values do not depend on the launch shape.
 */
#include "ew_impl.cuh"

using namespace odcu;

extern "C" bool od_cu_ew_supported(int op, int compute)
{
    return op >= 0 && op < OD_CU_EW_NUM_OPS && compute >= 0 && compute < OD_CU_NUM_DTYPES &&
           ew_ok(op, family_of(compute));
}

extern "C" cudaError_t od_cu_elementwise(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    if (!od_cu_ew_supported(a->op, a->compute) || it->numel <= 0)
        return it->numel == 0 ? cudaSuccess : cudaErrorNotSupported;
    if (a->op <= OD_CU_EW_MINIMUM)
        return od_cu_ew_group_arith(it, a, st);
    if (a->op <= OD_CU_EW_CLAMP_MAX)
        return od_cu_ew_group_cmp(it, a, st);
    if (a->op <= OD_CU_EW_NEXTAFTER)
        return od_cu_ew_group_tern(it, a, st);
    if (a->op < OD_CU_EW_GEN_FIRST)
        return od_cu_ew_group_unary(it, a, st);
    return ew_gen_arity(a->op) == 1 ? od_cu_ew_group_gen1(it, a, st) : od_cu_ew_group_gen2(it, a, st);
}

/* ---- fill ------------------------------------------------------------------------------ */

struct FillParams {
    char *data;
    int32_t ndim; /* innermost first */
    uint32_t n;
    uint32_t sizes[OD_CU_MAX_DIMS];
    FastDiv div[OD_CU_MAX_DIMS];
    int64_t bstrides[OD_CU_MAX_DIMS];
};

template <typename E> __global__ void __launch_bounds__(256) fill_general(const FillParams p, E v)
{
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
        int64_t off = 0;
        uint32_t idx = i;
#pragma unroll
        for (int d = 0; d < OD_CU_MAX_DIMS; d++) {
            if (d == p.ndim)
                break;
            uint32_t q = p.div[d].div(idx);
            off += (int64_t)(idx - q * p.sizes[d]) * p.bstrides[d];
            idx = q;
        }
        *(E *)(p.data + off) = v;
    }
}

/* Contiguous and 16-byte aligned: 16-byte stores of the replicated value. */
template <typename E> __global__ void __launch_bounds__(256) fill_contig(E *out, int64_t n, E v)
{
    constexpr int V = 16 / sizeof(E);
    Vec<E, V> vec;
#pragma unroll
    for (int e = 0; e < V; e++)
        vec.v[e] = v;
    int64_t nvec = n / V;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride)
        reinterpret_cast<Vec<E, V> *>(out)[i] = vec;
    for (int64_t i = nvec * V + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = v;
}

template <typename E>
static cudaError_t fill_launch(const od_cu_iter *it, E v, int sm_count, cudaStream_t st)
{
    if (it->numel <= 0)
        return cudaSuccess;
    const od_cu_operand *o = &it->op[0];
    bool contig = it->ndim == 0 || (it->ndim == 1 && o->strides[0] == 1);
    if (contig && aligned16(o->data)) {
        unsigned grid = grid_for((it->numel + (16 / sizeof(E)) - 1) / (16 / sizeof(E)), 256, sm_count, 8);
        fill_contig<E><<<grid, 256, 0, st>>>((E *)o->data, it->numel, v);
        return cudaGetLastError();
    }
    if (it->numel > INT32_MAX) {
        od_cu_iter h = *it;
        int64_t s0 = it->sizes[0], first = s0 / 2, inner = it->numel / s0;
        if (s0 < 2)
            return cudaErrorInvalidValue;
        h.sizes[0] = first;
        h.numel = first * inner;
        cudaError_t e = fill_launch<E>(&h, v, sm_count, st);
        if (e != cudaSuccess)
            return e;
        h = *it;
        h.sizes[0] = s0 - first;
        h.numel = (s0 - first) * inner;
        h.op[0].data = (char *)o->data + first * o->strides[0] * (int64_t)sizeof(E);
        return fill_launch<E>(&h, v, sm_count, st);
    }
    FillParams p;
    memset(&p, 0, sizeof p);
    p.data = (char *)o->data;
    p.ndim = it->ndim;
    p.n = (uint32_t)it->numel;
    for (int d = 0; d < it->ndim; d++) {
        int src = it->ndim - 1 - d;
        p.sizes[d] = (uint32_t)it->sizes[src];
        p.div[d] = FastDiv((uint32_t)it->sizes[src]);
        p.bstrides[d] = o->strides[src] * (int64_t)sizeof(E);
    }
    fill_general<E><<<grid_for(it->numel, 256, sm_count, 8), 256, 0, st>>>(p, v);
    return cudaGetLastError();
}

extern "C" cudaError_t od_cu_fill(const od_cu_iter *it, int elem_size, uint64_t bits, int sm_count,
                                  cudaStream_t st)
{
    switch (elem_size) {
    case 1: return fill_launch<uint8_t>(it, (uint8_t)bits, sm_count, st);
    case 2: return fill_launch<uint16_t>(it, (uint16_t)bits, sm_count, st);
    case 4: return fill_launch<uint32_t>(it, (uint32_t)bits, sm_count, st);
    case 8: return fill_launch<uint64_t>(it, (uint64_t)bits, sm_count, st);
    default: return cudaErrorInvalidValue;
    }
}

/* ---- arange ----------------------------------------------------------------------------- */

template <typename C>
__global__ void __launch_bounds__(256) arange_kernel(char *out, int dt, int64_t n, C start, C step)
{
    const int es = dtype_size(dt);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        C v;
        if constexpr (is_int_v<C>)
            v = od_math_add_i64(start, i, step); /* start + step * i, wrapping */
        else
            v = start + (double)i * step;
        store_dyn<C>(out + i * es, dt, v);
    }
}

extern "C" cudaError_t od_cu_arange(void *out, int dt, int64_t n, bool is_int, double start_d,
                                    double step_d, int64_t start_i, int64_t step_i, int sm_count,
                                    cudaStream_t st)
{
    if (n <= 0)
        return cudaSuccess;
    unsigned grid = grid_for(n, 256, sm_count, 8);
    if (is_int)
        arange_kernel<int64_t><<<grid, 256, 0, st>>>((char *)out, dt, n, start_i, step_i);
    else
        arange_kernel<double><<<grid, 256, 0, st>>>((char *)out, dt, n, start_d, step_d);
    return cudaGetLastError();
}

/* ---- random ------------------------------------------------------------------------------- */

__global__ void __launch_bounds__(256) random_kernel(char *out, int dt, int64_t n, bool normal,
                                                     int bits, uint64_t seed, uint64_t offset)
{
    const int es = dtype_size(dt);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        store_dyn<double>(out + i * es, dt, od_math_random_f64(seed, offset + (uint64_t)i, normal, bits));
}

extern "C" cudaError_t od_cu_random(void *out, int dt, int64_t n, bool normal, uint64_t seed,
                                    uint64_t offset, int sm_count, cudaStream_t st)
{
    if (n <= 0)
        return cudaSuccess;
    int bits = dt == OD_CU_BFLOAT16 ? 8 : dt == OD_CU_FLOAT16 ? 11 : dt == OD_CU_FLOAT32 ? 24 : 53;
    random_kernel<<<grid_for(n, 256, sm_count, 8), 256, 0, st>>>((char *)out, dt, n, normal, bits,
                                                                seed, offset);
    return cudaGetLastError();
}

/* ---- index_select ----------------------------------------------------------------------------- */

struct IndexParams {
    const char *self;
    char *out;
    const char *index;
    int32_t index_dtype;
    int32_t ndim;         /* innermost first */
    int32_t dim;          /* in that order */
    int32_t wide;         /* numel >= 2^31: 64-bit division */
    int64_t out_sizes[OD_CU_MAX_DIMS];
    FastDiv div[OD_CU_MAX_DIMS];
    int64_t bstrides[OD_CU_MAX_DIMS]; /* of self, bytes */
    int64_t index_bstride;
    int64_t limit;        /* self's size in dim */
    int64_t numel;
    int64_t *flag;
};

template <typename E> __global__ void __launch_bounds__(256) index_select_kernel(const IndexParams p)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.numel;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off = 0, idx = i;
        bool bad = false;
#pragma unroll
        for (int d = 0; d < OD_CU_MAX_DIMS; d++) {
            if (d == p.ndim)
                break;
            int64_t q, r;
            if (p.wide) {
                q = idx / p.out_sizes[d];
                r = idx - q * p.out_sizes[d];
            } else {
                q = p.div[d].div((uint32_t)idx);
                r = idx - q * p.out_sizes[d];
            }
            idx = q;
            if (d == p.dim) {
                const char *ip = p.index + r * p.index_bstride;
                int64_t j = p.index_dtype == OD_CU_INT32 ? (int64_t) * (const int32_t *)ip
                                                          : *(const int64_t *)ip;
                if (j < 0 || j >= p.limit) {
                    if (p.flag) {
                        *(volatile int64_t *)&p.flag[1] = j;
                        *(volatile int64_t *)&p.flag[0] = 1;
                    }
                    bad = true;
                    j = 0;
                }
                r = j;
            }
            off += r * p.bstrides[d];
        }
        ((E *)p.out)[i] = bad ? E(0) : *(const E *)(p.self + off);
    }
}

extern "C" cudaError_t od_cu_index_select(const od_cu_index_args *a, cudaStream_t st)
{
    if (a->numel <= 0)
        return cudaSuccess;
    IndexParams p;
    memset(&p, 0, sizeof p);
    p.self = (const char *)a->self;
    p.out = (char *)a->out;
    p.index = (const char *)a->index;
    p.index_dtype = a->index_dtype;
    p.ndim = a->ndim;
    p.dim = a->ndim - 1 - a->dim;
    p.wide = a->numel > INT32_MAX;
    p.limit = a->self_sizes[a->dim];
    p.numel = a->numel;
    p.flag = a->flag;
    p.index_bstride = a->index_stride * (a->index_dtype == OD_CU_INT32 ? 4 : 8);
    for (int d = 0; d < a->ndim; d++) {
        int src = a->ndim - 1 - d;
        int64_t sz = src == a->dim ? a->n_index : a->self_sizes[src];
        p.out_sizes[d] = sz;
        p.div[d] = FastDiv(sz > 0 && sz <= INT32_MAX ? (uint32_t)sz : 1u);
        p.bstrides[d] = a->self_strides[src] * a->elem_size;
    }
    unsigned grid = grid_for(a->numel, 256, a->sm_count, 8);
    switch (a->elem_size) {
    case 1: index_select_kernel<uint8_t><<<grid, 256, 0, st>>>(p); break;
    case 2: index_select_kernel<uint16_t><<<grid, 256, 0, st>>>(p); break;
    case 4: index_select_kernel<uint32_t><<<grid, 256, 0, st>>>(p); break;
    case 8: index_select_kernel<uint64_t><<<grid, 256, 0, st>>>(p); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
