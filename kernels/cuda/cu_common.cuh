/* cu_common.cuh — device helpers shared by the .cu files of kernels/cuda/.
 *
 * Invariants:
 *  - Element conversions match the host's casts (od_tensor_scalar, od_math.h):
 *    to bool is "!= 0"; floating -> int64 goes through od_double_to_i64 and
 *    floating -> narrower integers through od_math_f64_to_i32, keeping the
 *    low bits; integers -> narrower integers keep the low bits; anything ->
 *    float16/bfloat16 rounds to nearest even via float (like c10::Half).
 *  - Three compute families: float (float16, bfloat16, float32), double,
 *    int64_t (every integer dtype and bool), as in od_math.h.
 *  - FastDiv divides any n < 2^31 exactly by its divisor (PyTorch's
 *    IntDivider); callers index with 32 bits only below that bound.
 */
#ifndef OD_CU_COMMON_CUH
#define OD_CU_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "cuda_kernels.h"
#include "od_math.h"

namespace odcu {

/* ---- compute families ------------------------------------------------------------- */

enum Family { FAM_F32 = 0, FAM_F64 = 1, FAM_I64 = 2 };

__host__ __device__ constexpr int family_of(int dt)
{
    return dt == OD_CU_FLOAT64                                                 ? FAM_F64
           : (dt == OD_CU_FLOAT32 || dt == OD_CU_FLOAT16 || dt == OD_CU_BFLOAT16) ? FAM_F32
                                                                                : FAM_I64;
}

template <int F> struct FamType;
template <> struct FamType<FAM_F32> { using type = float; };
template <> struct FamType<FAM_F64> { using type = double; };
template <> struct FamType<FAM_I64> { using type = int64_t; };

template <typename C> constexpr bool is_int_v = std::is_same<C, int64_t>::value;

/* ---- storage types ------------------------------------------------------------------- */

struct half_t { uint16_t x; };
struct bf16_t { uint16_t x; };

template <int DT> struct Storage;
template <> struct Storage<OD_CU_BOOL> { using type = uint8_t; };
template <> struct Storage<OD_CU_UINT8> { using type = uint8_t; };
template <> struct Storage<OD_CU_INT8> { using type = int8_t; };
template <> struct Storage<OD_CU_INT16> { using type = int16_t; };
template <> struct Storage<OD_CU_INT32> { using type = int32_t; };
template <> struct Storage<OD_CU_INT64> { using type = int64_t; };
template <> struct Storage<OD_CU_FLOAT16> { using type = half_t; };
template <> struct Storage<OD_CU_BFLOAT16> { using type = bf16_t; };
template <> struct Storage<OD_CU_FLOAT32> { using type = float; };
template <> struct Storage<OD_CU_FLOAT64> { using type = double; };

__host__ __device__ constexpr int dtype_size(int dt)
{
    return dt == OD_CU_INT64 || dt == OD_CU_FLOAT64                            ? 8
           : dt == OD_CU_INT32 || dt == OD_CU_FLOAT32                          ? 4
           : dt == OD_CU_INT16 || dt == OD_CU_FLOAT16 || dt == OD_CU_BFLOAT16 ? 2
                                                                              : 1;
}

__device__ __forceinline__ float h2f(uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float bf2f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
__device__ __forceinline__ uint16_t f2bf(float f) { return od_float_to_bf16(f); }

/* Storage value -> compute type C. */
template <typename C, typename S> __device__ __forceinline__ C to_c(S v)
{
    if constexpr (std::is_same<S, half_t>::value)
        return (C)h2f(v.x); /* C is float or double: int family never loads halves */
    else if constexpr (std::is_same<S, bf16_t>::value)
        return (C)bf2f(v.x);
    else if constexpr (is_int_v<C> && std::is_floating_point<S>::value)
        return od_double_to_i64((double)v);
    else
        return (C)v;
}

/* Compute value -> storage of dtype DT. */
template <int DT, typename C> __device__ __forceinline__ typename Storage<DT>::type from_c(C v)
{
    using S = typename Storage<DT>::type;
    if constexpr (DT == OD_CU_BOOL) {
        return (S)(v != (C)0);
    } else if constexpr (DT == OD_CU_FLOAT16) {
        return S{f2h((float)v)};
    } else if constexpr (DT == OD_CU_BFLOAT16) {
        return S{f2bf((float)v)};
    } else if constexpr (DT == OD_CU_FLOAT32 || DT == OD_CU_FLOAT64) {
        return (S)v;
    } else if constexpr (DT == OD_CU_INT64) {
        if constexpr (is_int_v<C>)
            return v;
        else
            return od_double_to_i64((double)v);
    } else { /* uint8, int8, int16, int32: keep the low bits */
        using U = typename std::make_unsigned<S>::type;
        if constexpr (is_int_v<C>)
            return (S)(U)(uint64_t)v;
        else
            return (S)(U)(uint32_t)od_math_f64_to_i32((double)v);
    }
}

/* A value of compute type C as a value of dtype dt: ATen casts each input
 * to the computation's dtype first (an int16 300 in a uint8 computation is
 * 44; a float input of a float16 computation rounds to half). */
template <typename C> __device__ __forceinline__ C round_to_dtype(C v, int dt)
{
    if constexpr (is_int_v<C>) {
        switch (dt) {
        case OD_CU_BOOL: return (C)(v != 0);
        case OD_CU_UINT8: return (C)(uint8_t)v;
        case OD_CU_INT8: return (C)(int8_t)v;
        case OD_CU_INT16: return (C)(int16_t)v;
        case OD_CU_INT32: return (C)(int32_t)v;
        default: return v;
        }
    } else {
        switch (dt) {
        case OD_CU_FLOAT16: return (C)h2f(f2h((float)v));
        case OD_CU_BFLOAT16: return (C)bf2f(f2bf((float)v));
        case OD_CU_FLOAT32: return (C)(float)v;
        default: return v;
        }
    }
}

/* Dynamic-dtype load / store (for iterators whose operands differ in dtype). */
template <typename C> __device__ __forceinline__ C load_dyn(const char *p, int dt)
{
    switch (dt) {
    case OD_CU_BOOL: return (C)(*(const uint8_t *)p != 0);
    case OD_CU_UINT8: return (C)*(const uint8_t *)p;
    case OD_CU_INT8: return (C)*(const int8_t *)p;
    case OD_CU_INT16: return (C)*(const int16_t *)p;
    case OD_CU_INT32: return (C)*(const int32_t *)p;
    case OD_CU_INT64: return (C)*(const int64_t *)p;
    case OD_CU_FLOAT16: return to_c<C>(*(const half_t *)p);
    case OD_CU_BFLOAT16: return to_c<C>(*(const bf16_t *)p);
    case OD_CU_FLOAT32: return to_c<C>(*(const float *)p);
    default: return to_c<C>(*(const double *)p);
    }
}

template <typename C> __device__ __forceinline__ void store_dyn(char *p, int dt, C v)
{
    switch (dt) {
    case OD_CU_BOOL: *(uint8_t *)p = from_c<OD_CU_BOOL>(v); break;
    case OD_CU_UINT8: *(uint8_t *)p = from_c<OD_CU_UINT8>(v); break;
    case OD_CU_INT8: *(int8_t *)p = from_c<OD_CU_INT8>(v); break;
    case OD_CU_INT16: *(int16_t *)p = from_c<OD_CU_INT16>(v); break;
    case OD_CU_INT32: *(int32_t *)p = from_c<OD_CU_INT32>(v); break;
    case OD_CU_INT64: *(int64_t *)p = from_c<OD_CU_INT64>(v); break;
    case OD_CU_FLOAT16: *(half_t *)p = from_c<OD_CU_FLOAT16>(v); break;
    case OD_CU_BFLOAT16: *(bf16_t *)p = from_c<OD_CU_BFLOAT16>(v); break;
    case OD_CU_FLOAT32: *(float *)p = from_c<OD_CU_FLOAT32>(v); break;
    default: *(double *)p = from_c<OD_CU_FLOAT64>(v); break;
    }
}

/* V elements loaded or stored as one aligned access (16 bytes at most). */
template <typename T, int V> struct alignas(sizeof(T) * V) Vec {
    T v[V];
};

/* ---- 32-bit division by an invariant divisor --------------------------------------------- */

struct FastDiv {
    uint32_t d, m, s;
    FastDiv() = default;
    __host__ explicit FastDiv(uint32_t div) : d(div)
    {
        s = 0;
        while (s < 32 && (1ull << s) < div)
            s++;
        uint64_t one = 1;
        m = (uint32_t)(((one << 32) * ((one << s) - div)) / div + 1);
    }
    /* n < 2^31 */
    __device__ __forceinline__ uint32_t div(uint32_t n) const
    {
        uint32_t t = __umulhi(n, m);
        return (t + n) >> s;
    }
};

/* ---- launch shape -------------------------------------------------------------------------- */

static inline unsigned grid_for(int64_t work_items, int threads, int sm_count, int blocks_per_sm)
{
    int64_t g = (work_items + threads - 1) / threads;
    int64_t cap = (int64_t)sm_count * blocks_per_sm;
    if (g > cap)
        g = cap;
    return g < 1 ? 1u : (unsigned)g;
}

/* Generic warp shuffle of any trivially copyable value (by 32-bit words). */
template <typename T> __device__ __forceinline__ T shfl_down_any(T v, int delta, int width = 32)
{
    static_assert(sizeof(T) % 4 == 0, "shuffle by words");
    constexpr int W = sizeof(T) / 4;
    uint32_t w[W];
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < W; i++)
        w[i] = __shfl_down_sync(0xffffffffu, w[i], delta, width);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

template <typename T> __device__ __forceinline__ T shfl_xor_any(T v, int mask, int width = 32)
{
    static_assert(sizeof(T) % 4 == 0, "shuffle by words");
    constexpr int W = sizeof(T) / 4;
    uint32_t w[W];
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int i = 0; i < W; i++)
        w[i] = __shfl_xor_sync(0xffffffffu, w[i], mask, width);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

} // namespace odcu

#endif
