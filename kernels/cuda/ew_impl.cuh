/* ew_impl.cuh — the elementwise kernels, included by the ew_*.cu files, each
 * of which instantiates one group of operations (several translation units
 * keep the build parallel and each object small).
 *
 * Invariants:
 *  - Per-element math is od_math.h's, chosen by compute family; this file
 *    only moves data: loads convert each input to the compute type C (an
 *    input of another dtype rounded to the compute dtype first, as ATen
 *    casts it), the result converts to the output's dtype (cu_common.cuh's
 *    casts).
 *  - Two kernels per (op, family): ew_contig, for contiguous operands of one
 *    fast dtype with 16-byte aligned pointers (16-byte vector loads and
 *    stores, grid-stride, two vectors in flight per thread); ew_general, for
 *    anything else (dims reversed so dim 0 is the innermost, per-element
 *    offsets from 32-bit FastDiv, dtype switched per operand). ew_general
 *    needs numel < 2^31: the launcher splits larger iterations along their
 *    outermost dim.
 */
#ifndef OD_EW_IMPL_CUH
#define OD_EW_IMPL_CUH

#include "cu_common.cuh"
#include "od_ew.h"

namespace odcu {

/* The inputs (1 or 2) and rule of an OD_EW1 / OD_EW2 / OD_EWP operator; 0
 * for others. */
__host__ __device__ constexpr int ew_gen_arity(int op)
{
    switch (op) {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW1(id, schema, fn, rule, ag) case OD_CU_EW_##id: return 1;
#define OD_EW2(id, schema, fn, rule, ag) case OD_CU_EW_##id: return 2;
#define OD_EWP(id, schema, fn, rule, ag) case OD_CU_EW_##id: return 1;
#include "ops.def"
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP
    default: return 0;
    }
}
__host__ __device__ constexpr int ew_gen_rule(int op)
{
    switch (op) {
#define OD_EW1(id, schema, fn, rule, ag) case OD_CU_EW_##id: return OD_EWR_##rule;
#define OD_EW2(id, schema, fn, rule, ag) case OD_CU_EW_##id: return OD_EWR_##rule;
#define OD_EWP(id, schema, fn, rule, ag) case OD_CU_EW_##id: return OD_EWR_##rule;
#include "ops.def"
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP
    default: return OD_EWR_NONE;
    }
}

__host__ __device__ constexpr int ew_nops(int op)
{
    return op >= OD_CU_EW_GEN_FIRST ? ew_gen_arity(op) + 1
           : op == OD_CU_EW_WHERE || op == OD_CU_EW_CLAMP || op == OD_CU_EW_LERP || op == OD_CU_EW_ADDCMUL ||
                   op == OD_CU_EW_ADDCDIV
               ? 4
           : (op >= OD_CU_EW_ADD && op <= OD_CU_EW_GE) || op == OD_CU_EW_CLAMP_MIN ||
                   op == OD_CU_EW_CLAMP_MAX || op == OD_CU_EW_NEXTAFTER || op == OD_CU_EW_LERP_S
               ? 3
               : 2;
}

/* The output is bool: comparisons and the LOGICAL rule. */
__host__ __device__ constexpr bool ew_out_bool(int op)
{
    return (op >= OD_CU_EW_EQ && op <= OD_CU_EW_GE) || ew_gen_rule(op) == OD_EWR_LOGICAL;
}

/* Which (op, family) pairs have kernels. */
__host__ __device__ constexpr bool ew_ok(int op, int fam)
{
    if (op >= OD_CU_EW_GEN_FIRST) {
        int r = ew_gen_rule(op);
        if (r == OD_EWR_FLOAT || r == OD_EWR_FLOAT_ONLY || r == OD_EWR_FLOAT_NOHALF ||
            r == OD_EWR_FLOAT_ONLY_NOHALF)
            return fam != FAM_I64;
        return (r != OD_EWR_BITWISE && r != OD_EWR_INT) || fam == FAM_I64;
    }
    return fam != FAM_I64 || (op != OD_CU_EW_DIV && op != OD_CU_EW_GELU && op != OD_CU_EW_GELU_TANH &&
                              op != OD_CU_EW_LERP && op != OD_CU_EW_LERP_S && op != OD_CU_EW_ADDCDIV &&
                              op != OD_CU_EW_NEXTAFTER);
}

/* The math of the OD_EW1 / OD_EW2 / OD_EWP operators, generated from
 * ops.def: each calls od_math_<fn>_<family> where its rule has that family
 * (the others are never launched: ew_ok); an OD_EWP operator's math takes
 * its parameters prm in the family. INT_DIV reports an integer divisor of 0
 * like div's rounding modes. */
/* The signed width gcd and lcm compute in, as the CPU's (elementwise.c):
 * the compute dtype's own, 64 for uint8 and bool (never negative). */
__device__ __forceinline__ int ew_int_bits(int cdt)
{
    return cdt == OD_CU_INT8 ? 8 : cdt == OD_CU_INT16 ? 16 : cdt == OD_CU_INT32 ? 32 : 64;
}

template <int OP, typename C>
__device__ __forceinline__ C ew_gen_apply(C a, C b, const C *prm, int64_t *flag, int cdt)
{
    constexpr bool I = is_int_v<C>;
    constexpr bool D = std::is_same<C, double>::value;
    (void)a;
    (void)b;
    (void)prm;
    (void)flag;
    (void)cdt;
    /* gcd and lcm in the tensor's own width (gcd(-32768, 6) is -2 in int16),
     * with od_math.h's device-callable forms the CPU uses */
    if constexpr (I && OP == OD_CU_EW_gcd)
        return (C)od_math_gcd_bits_i64(a, b, ew_int_bits(cdt));
    if constexpr (I && OP == OD_CU_EW_lcm)
        return (C)od_math_lcm_bits_i64(a, b, ew_int_bits(cdt));
#define OD_EW_CALL_(id, fn, rule, ...)                                          \
    if constexpr (OP == OD_CU_EW_##id) {                                        \
        if constexpr (I) {                                                      \
            OD_EWR_I64_##rule(return (C)od_math_##fn##_i64(__VA_ARGS__);)        \
        } else if constexpr (D) {                                               \
            OD_EWR_FLT_##rule(return (C)od_math_##fn##_f64(__VA_ARGS__);)        \
        } else {                                                                \
            OD_EWR_FLT_##rule(return (C)od_math_##fn##_f32(__VA_ARGS__);)        \
        }                                                                       \
    }
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW1(id, schema, fn, rule, ag) OD_EW_CALL_(id, fn, rule, a)
#define OD_EW2(id, schema, fn, rule, ag)                                            \
    if constexpr (OP == OD_CU_EW_##id && I && OD_EWR_ZERO_DIV_##rule) {         \
        if (b == 0) { /* PyTorch raises ZeroDivisionError: report, write 0 */  \
            if (flag)                                                           \
                *(volatile int64_t *)flag = 1;                                  \
            return C(0);                                                        \
        }                                                                       \
    }                                                                           \
    OD_EW_CALL_(id, fn, rule, a, b)
#define OD_EWP(id, schema, fn, rule, ag) OD_EW_CALL_(id, fn, rule, a, prm)
#include "ops.def"
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP
#undef OD_EW_CALL_
    return C(0);
}

template <int OP, typename C>
__device__ __forceinline__ C ew_apply(C a, C b, C c, C alpha, const C *prm, int64_t *flag, int cdt)
{
    constexpr bool I = is_int_v<C>;
    constexpr bool D = std::is_same<C, double>::value;
#define OD_FAM_(name, ...)                             \
    do {                                               \
        if constexpr (I)                               \
            return (C)od_math_##name##_i64(__VA_ARGS__); \
        else if constexpr (D)                          \
            return (C)od_math_##name##_f64(__VA_ARGS__); \
        else                                           \
            return (C)od_math_##name##_f32(__VA_ARGS__); \
    } while (0)
#define OD_FLT_(name, ...)                             \
    do {                                               \
        if constexpr (D)                               \
            return od_math_##name##_f64(__VA_ARGS__);  \
        else if constexpr (!I)                         \
            return od_math_##name##_f32(__VA_ARGS__);  \
        else                                           \
            return (C)0;                               \
    } while (0)
    (void)b;
    (void)c;
    (void)alpha;
    (void)flag;
    (void)cdt;
    (void)prm;
    if constexpr (OP >= OD_CU_EW_GEN_FIRST)
        return ew_gen_apply<OP, C>(a, b, prm, flag, cdt);
    else if constexpr (OP == OD_CU_EW_COPY)
        return a;
    else if constexpr (OP == OD_CU_EW_ADD)
        OD_FAM_(add, a, b, alpha);
    else if constexpr (OP == OD_CU_EW_SUB)
        OD_FAM_(sub, a, b, alpha);
    else if constexpr (OP == OD_CU_EW_MUL)
        OD_FAM_(mul, a, b);
    else if constexpr (OP == OD_CU_EW_DIV)
        OD_FLT_(div, a, b);
    else if constexpr (OP == OD_CU_EW_DIV_TRUNC || OP == OD_CU_EW_DIV_FLOOR) {
        if constexpr (I) {
            if (b == 0) { /* PyTorch raises ZeroDivisionError: report, write 0 */
                if (flag)
                    *(volatile int64_t *)flag = 1;
                return 0;
            }
        }
        if constexpr (OP == OD_CU_EW_DIV_TRUNC && !I) {
            /* float16/bfloat16: the quotient rounds to 16 bits before trunc,
             * as in ATen (scalar_t a / b) and the CPU kernel */
            if (cdt == OD_CU_FLOAT16 || cdt == OD_CU_BFLOAT16)
                return (C)trunc(round_to_dtype<C>(a / b, cdt));
        }
        if constexpr (OP == OD_CU_EW_DIV_TRUNC)
            OD_FAM_(div_trunc, a, b);
        else
            OD_FAM_(div_floor, a, b);
    } else if constexpr (OP == OD_CU_EW_POW)
        OD_FAM_(pow, a, b);
    else if constexpr (OP == OD_CU_EW_MAXIMUM)
        OD_FAM_(maximum, a, b);
    else if constexpr (OP == OD_CU_EW_MINIMUM)
        OD_FAM_(minimum, a, b);
    else if constexpr (OP == OD_CU_EW_EQ)
        OD_FAM_(eq, a, b);
    else if constexpr (OP == OD_CU_EW_NE)
        OD_FAM_(ne, a, b);
    else if constexpr (OP == OD_CU_EW_LT)
        OD_FAM_(lt, a, b);
    else if constexpr (OP == OD_CU_EW_LE)
        OD_FAM_(le, a, b);
    else if constexpr (OP == OD_CU_EW_GT)
        OD_FAM_(gt, a, b);
    else if constexpr (OP == OD_CU_EW_GE)
        OD_FAM_(ge, a, b);
    else if constexpr (OP == OD_CU_EW_WHERE)
        return a != (C)0 ? b : c;
    else if constexpr (OP == OD_CU_EW_CLAMP)
        OD_FAM_(clamp, a, b, c);
    else if constexpr (OP == OD_CU_EW_CLAMP_MIN)
        OD_FAM_(maximum, a, b);
    else if constexpr (OP == OD_CU_EW_CLAMP_MAX)
        OD_FAM_(minimum, a, b);
    else if constexpr (OP == OD_CU_EW_LERP)
        OD_FLT_(lerp, a, b, c);
    else if constexpr (OP == OD_CU_EW_LERP_S)
        OD_FLT_(lerp, a, b, alpha);
    else if constexpr (OP == OD_CU_EW_ADDCMUL)
        OD_FAM_(addcmul, a, b, c, alpha);
    else if constexpr (OP == OD_CU_EW_ADDCDIV)
        OD_FLT_(addcdiv, a, b, c, alpha);
    else if constexpr (OP == OD_CU_EW_NEXTAFTER)
        OD_FLT_(nextafter, a, b);
    else if constexpr (OP == OD_CU_EW_NEG)
        OD_FAM_(neg, a);
    else if constexpr (OP == OD_CU_EW_ABS)
        OD_FAM_(abs, a);
    else if constexpr (OP == OD_CU_EW_RELU)
        OD_FAM_(relu, a);
    else if constexpr (OP == OD_CU_EW_GELU)
        OD_FLT_(gelu, a);
    else if constexpr (OP == OD_CU_EW_GELU_TANH)
        OD_FLT_(gelu_tanh, a);
    else
        return a;
#undef OD_FAM_
#undef OD_FLT_
}

template <typename C> __device__ __forceinline__ C const_as(double d, int64_t i)
{
    if constexpr (is_int_v<C>)
        return (C)i;
    else
        return (C)d;
}

/* ---- general (strided, mixed dtypes) -------------------------------------------------- */

template <int N> struct GenParams {
    int32_t ndim;                          /* dims stored innermost first */
    uint32_t n;                            /* elements, < 2^31 */
    uint32_t sizes[OD_CU_MAX_DIMS];
    FastDiv div[OD_CU_MAX_DIMS];
    int64_t bstrides[N][OD_CU_MAX_DIMS];   /* byte strides */
    char *data[N];
    int32_t dtype[N];
    int32_t is_const[N];
    double cd[N];
    int64_t ci[N];
    double alpha_d;
    int64_t alpha_i;
    double prm_d[OD_CU_EW_MAX_PARAMS];     /* OD_EWP parameters */
    int64_t prm_i[OD_CU_EW_MAX_PARAMS];
    int64_t *flag;
    int32_t compute;                       /* OD_CU_* dtype inputs are cast to */
};

template <int OP, typename C>
__global__ void __launch_bounds__(256) ew_general(const GenParams<ew_nops(OP)> p)
{
    constexpr int N = ew_nops(OP);
    C cst[3] = {C(0), C(0), C(0)};
#pragma unroll
    for (int k = 1; k < N; k++)
        if (p.is_const[k])
            cst[k - 1] = const_as<C>(p.cd[k], p.ci[k]);
    const C alpha = const_as<C>(p.alpha_d, p.alpha_i);
    C prm[OD_CU_EW_MAX_PARAMS];
#pragma unroll
    for (int k = 0; k < OD_CU_EW_MAX_PARAMS; k++)
        prm[k] = const_as<C>(p.prm_d[k], p.prm_i[k]);
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        int64_t off[N];
#pragma unroll
        for (int k = 0; k < N; k++)
            off[k] = 0;
        uint32_t idx = i;
#pragma unroll
        for (int d = 0; d < OD_CU_MAX_DIMS; d++) {
            if (d == p.ndim)
                break;
            uint32_t q = p.div[d].div(idx);
            uint32_t r = idx - q * p.sizes[d];
            idx = q;
#pragma unroll
            for (int k = 0; k < N; k++)
                off[k] += (int64_t)r * p.bstrides[k][d];
        }
        C v[3] = {cst[0], cst[1], cst[2]};
#pragma unroll
        for (int k = 1; k < N; k++)
            if (!p.is_const[k]) {
                v[k - 1] = load_dyn<C>(p.data[k] + off[k], p.dtype[k]);
                if (p.dtype[k] != p.compute)
                    v[k - 1] = round_to_dtype<C>(v[k - 1], p.compute);
            }
        C r = ew_apply<OP, C>(v[0], v[1], v[2], alpha, prm, p.flag, p.compute);
        store_dyn<C>(p.data[0] + off[0], p.dtype[0], r);
    }
}

/* ---- contiguous, one dtype, 16-byte vectors ------------------------------------------- */

template <int N> struct ContigParams {
    char *data[N];     /* data[0]: output */
    int32_t is_const[N];
    double cd[N];
    int64_t ci[N];
    int64_t n;
    double alpha_d;
    int64_t alpha_i;
    double prm_d[OD_CU_EW_MAX_PARAMS];
    int64_t prm_i[OD_CU_EW_MAX_PARAMS];
    int64_t *flag;
};

template <int OP, int DT, int DTO>
__global__ void __launch_bounds__(256) ew_contig(const ContigParams<ew_nops(OP)> p)
{
    constexpr int N = ew_nops(OP);
    using S = typename Storage<DT>::type;
    using SO = typename Storage<DTO>::type;
    using C = typename FamType<family_of(DT)>::type;
    constexpr int V = 16 / sizeof(S) > 8 ? 8 : 16 / sizeof(S);
    constexpr int U = 2; /* vectors in flight per thread */
    C cst[3] = {C(0), C(0), C(0)};
#pragma unroll
    for (int k = 1; k < N; k++)
        if (p.is_const[k])
            cst[k - 1] = const_as<C>(p.cd[k], p.ci[k]);
    const C alpha = const_as<C>(p.alpha_d, p.alpha_i);
    C prm[OD_CU_EW_MAX_PARAMS];
#pragma unroll
    for (int k = 0; k < OD_CU_EW_MAX_PARAMS; k++)
        prm[k] = const_as<C>(p.prm_d[k], p.prm_i[k]);
    const int64_t nvec = p.n / V;
    const int64_t step = (int64_t)gridDim.x * blockDim.x * U;
    for (int64_t base = (int64_t)blockIdx.x * blockDim.x * U + threadIdx.x; base < nvec; base += step) {
        Vec<S, V> in[U][N > 1 ? N - 1 : 1];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t vi = base + (int64_t)u * blockDim.x;
            if (vi < nvec) {
#pragma unroll
                for (int k = 1; k < N; k++)
                    if (!p.is_const[k])
                        in[u][k - 1] = reinterpret_cast<const Vec<S, V> *>(p.data[k])[vi];
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t vi = base + (int64_t)u * blockDim.x;
            if (vi < nvec) {
                Vec<SO, V> o;
#pragma unroll
                for (int e = 0; e < V; e++) {
                    C x[3] = {cst[0], cst[1], cst[2]};
#pragma unroll
                    for (int k = 1; k < N; k++)
                        if (!p.is_const[k])
                            x[k - 1] = to_c<C>(in[u][k - 1].v[e]);
                    o.v[e] = from_c<DTO>(ew_apply<OP, C>(x[0], x[1], x[2], alpha, prm, p.flag, DT));
                }
                reinterpret_cast<Vec<SO, V> *>(p.data[0])[vi] = o;
            }
        }
    }
    /* The tail that does not fill a vector. */
    for (int64_t i = nvec * V + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.n;
         i += (int64_t)gridDim.x * blockDim.x) {
        C x[3] = {cst[0], cst[1], cst[2]};
#pragma unroll
        for (int k = 1; k < N; k++)
            if (!p.is_const[k])
                x[k - 1] = to_c<C>(reinterpret_cast<const S *>(p.data[k])[i]);
        reinterpret_cast<SO *>(p.data[0])[i] =
            from_c<DTO>(ew_apply<OP, C>(x[0], x[1], x[2], alpha, prm, p.flag, DT));
    }
}

/* ---- launch -------------------------------------------------------------------------------- */

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Contiguous after coalescing: one dim of stride 1 (or a single element). */
static inline bool operand_contig(const od_cu_iter *it, int k)
{
    if (it->op[k].is_const)
        return true;
    return it->ndim == 0 || (it->ndim == 1 && it->op[k].strides[0] == 1);
}

template <int OP, int DT>
static cudaError_t launch_contig(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    constexpr int N = ew_nops(OP);
    constexpr int DTO = ew_out_bool(OP) ? OD_CU_BOOL : DT;
    ContigParams<N> p;
    memset(&p, 0, sizeof p);
    for (int k = 0; k < N; k++) {
        p.data[k] = (char *)it->op[k].data;
        p.is_const[k] = it->op[k].is_const;
        p.cd[k] = it->op[k].cd;
        p.ci[k] = it->op[k].ci;
    }
    p.n = it->numel;
    p.alpha_d = a->alpha_d;
    p.alpha_i = a->alpha_i;
    for (int k = 0; k < OD_CU_EW_MAX_PARAMS; k++) {
        p.prm_d[k] = a->prm_d[k];
        p.prm_i[k] = a->prm_i[k];
    }
    p.flag = a->flag;
    constexpr int V = 16 / sizeof(typename Storage<DT>::type) > 8 ? 8 : 16 / sizeof(typename Storage<DT>::type);
    int64_t work = (p.n + V * 2 - 1) / (V * 2);
    unsigned grid = grid_for(work, 256, a->sm_count, 8);
    ew_contig<OP, DT, DTO><<<grid, 256, 0, st>>>(p);
    return cudaGetLastError();
}

template <int OP, typename C>
static cudaError_t launch_general(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    constexpr int N = ew_nops(OP);
    if (it->numel > INT32_MAX) {
        /* Split the outermost dim (it->sizes[0]) in two and recurse: each
         * piece is the same iteration with shifted base pointers. */
        od_cu_iter h = *it;
        int64_t s0 = it->ndim > 0 ? it->sizes[0] : 1;
        if (s0 < 2)
            return cudaErrorInvalidValue; /* one slab >= 2^31: not coalescable (cannot happen for sane strides) */
        int64_t first = s0 / 2;
        int64_t inner = it->numel / s0;
        h.sizes[0] = first;
        h.numel = first * inner;
        cudaError_t e = launch_general<OP, C>(&h, a, st);
        if (e != cudaSuccess)
            return e;
        h = *it;
        h.sizes[0] = s0 - first;
        h.numel = (s0 - first) * inner;
        for (int k = 0; k < N; k++)
            if (!h.op[k].is_const)
                h.op[k].data = (char *)h.op[k].data +
                               first * h.op[k].strides[0] * dtype_size(h.op[k].dtype);
        return launch_general<OP, C>(&h, a, st);
    }
    GenParams<N> p;
    memset(&p, 0, sizeof p);
    p.ndim = it->ndim;
    p.n = (uint32_t)it->numel;
    for (int d = 0; d < it->ndim; d++) {
        int src = it->ndim - 1 - d; /* reverse: innermost first */
        p.sizes[d] = (uint32_t)it->sizes[src];
        p.div[d] = FastDiv((uint32_t)it->sizes[src]);
        for (int k = 0; k < N; k++)
            p.bstrides[k][d] = it->op[k].strides[src] * dtype_size(it->op[k].dtype);
    }
    for (int k = 0; k < N; k++) {
        p.data[k] = (char *)it->op[k].data;
        p.dtype[k] = it->op[k].dtype;
        p.is_const[k] = it->op[k].is_const;
        p.cd[k] = it->op[k].cd;
        p.ci[k] = it->op[k].ci;
    }
    p.alpha_d = a->alpha_d;
    p.alpha_i = a->alpha_i;
    for (int k = 0; k < OD_CU_EW_MAX_PARAMS; k++) {
        p.prm_d[k] = a->prm_d[k];
        p.prm_i[k] = a->prm_i[k];
    }
    p.flag = a->flag;
    p.compute = a->compute;
    unsigned grid = grid_for(it->numel, 256, a->sm_count, 8);
    ew_general<OP, C><<<grid, 256, 0, st>>>(p);
    return cudaGetLastError();
}

/* The fast dtypes: every other dtype takes the general path. */
#define OD_EW_FAST_DTYPES(X) X(OD_CU_FLOAT32) X(OD_CU_FLOAT16) X(OD_CU_BFLOAT16) X(OD_CU_FLOAT64) \
    X(OD_CU_INT32) X(OD_CU_INT64)

template <int OP> static cudaError_t ew_launch(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    constexpr int N = ew_nops(OP);
    const int fam = family_of(a->compute);
    if (!ew_ok(OP, fam) || it->nops != N)
        return cudaErrorNotSupported;
    /* Fast path: every tensor operand contiguous, 16-byte aligned, of one
     * fast dtype in the compute family (output bool for comparisons). */
    int dt = -1;
    bool fast = true;
    for (int k = 1; k < N && fast; k++) {
        if (it->op[k].is_const)
            continue;
        if (dt < 0)
            dt = it->op[k].dtype;
        fast = it->op[k].dtype == dt && dt == a->compute && operand_contig(it, k) && aligned16(it->op[k].data);
    }
    if (fast && dt >= 0) {
        int want_out = ew_out_bool(OP) ? OD_CU_BOOL : dt;
        fast = family_of(dt) == fam && it->op[0].dtype == want_out && operand_contig(it, 0) &&
               aligned16(it->op[0].data);
    } else {
        fast = false;
    }
    if (fast) {
        switch (dt) {
#define OD_X_(D)                                                   \
    case D:                                                        \
        if constexpr (ew_ok(OP, family_of(D)))                     \
            return launch_contig<OP, D>(it, a, st);                \
        break;
            OD_EW_FAST_DTYPES(OD_X_)
#undef OD_X_
        default: break;
        }
    }
    switch (fam) {
    case FAM_F32: return launch_general<OP, float>(it, a, st);
    case FAM_F64: return launch_general<OP, double>(it, a, st);
    default:
        if constexpr (ew_ok(OP, FAM_I64))
            return launch_general<OP, int64_t>(it, a, st);
        return cudaErrorNotSupported;
    }
}

} // namespace odcu

/* One function per group of operations (ew_arith.cu, ew_cmp.cu, ew_unary.cu,
 * and ew_gen1.cu / ew_gen2.cu through ew_gen.cuh for the OD_EW1 / OD_EW2
 * operators). */
cudaError_t od_cu_ew_group_arith(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st);
cudaError_t od_cu_ew_group_cmp(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st);
cudaError_t od_cu_ew_group_tern(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st);
cudaError_t od_cu_ew_group_unary(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st);
cudaError_t od_cu_ew_group_gen1(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st);
cudaError_t od_cu_ew_group_gen2(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st);

#endif
