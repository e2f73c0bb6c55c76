/* od_half.h — scalar conversions shared by the runtime and every kernel family.
 *
 * Invariants:
 *  - float16 and bfloat16 are stored as their raw uint16_t bit patterns.
 *  - float -> half and float -> bfloat16 round to nearest, ties to even,
 *    overflow to +-inf, keep NaN a (quiet) NaN with its sign; half/bfloat16
 *    -> float is exact. double -> half goes through float, as c10::Half does.
 *  - Everything is `static inline` and marked OD_HD, so the same code compiles
 *    for the host (C11) and for CUDA device code (nvcc, C++17).
 */
#ifndef OD_HALF_H
#define OD_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define OD_HD __host__ __device__
#else
#define OD_HD
#endif

static inline OD_HD uint32_t od_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

static inline OD_HD float od_f32_from_bits(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* IEEE binary16 bits -> float (exact). */
static inline OD_HD float od_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise into a float exponent */
            int e = 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                e--;
            }
            man &= 0x3ffu;
            bits = sign | ((uint32_t)(e + 112) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    return od_f32_from_bits(bits);
}

/* float -> IEEE binary16 bits, round to nearest even. */
static inline OD_HD uint16_t od_float_to_half(float f)
{
    uint32_t x = od_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: keep the top payload bits, force quiet */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x47800000u) /* >= 65536 (or inf): beyond the half range */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* normal half: rebias, round the 13 dropped bits */
        uint32_t h = ((ax - 0x38000000u) >> 13);
        uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
            h++; /* a carry into the exponent is the correct rounding (up to inf) */
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 ties to even 0) */
        return (uint16_t)sign;
    { /* subnormal half: value = m * 2^(e-150), unit 2^-24 */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
}

/* bfloat16 bits -> float (exact). */
static inline OD_HD float od_bf16_to_float(uint16_t b)
{
    return od_f32_from_bits((uint32_t)b << 16);
}

/* float -> bfloat16 bits, round to nearest even. */
static inline OD_HD uint16_t od_float_to_bf16(float f)
{
    uint32_t x = od_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN, sign kept */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* float rounded to the nearest bfloat16, as float: one bfloat16 step of a
 * computation that keeps its intermediates in bfloat16. */
static inline OD_HD float od_bf16_round(float f) { return od_bf16_to_float(od_float_to_bf16(f)); }

static inline OD_HD uint16_t od_double_to_half(double d) { return od_float_to_half((float)d); }
static inline OD_HD uint16_t od_double_to_bf16(double d) { return od_float_to_bf16((float)d); }

/* double -> integer without undefined behaviour, the way torch's CPU casts
 * behave on x86: a value in range truncates toward zero (a C cast); NaN and
 * values out of range give the "integer indefinite" INT64_MIN / INT32_MIN.
 * The narrow dtypes take the low bits of a wider conversion: uint8 of int64
 * (as c10 does, so -1.0 -> 255), int8 and int16 of int32 (what the compiler
 * emits for static_cast, so 300.0 -> int8 44, 70000.0 -> int16 4464). */
static inline OD_HD int64_t od_double_to_i64(double d)
{
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0)
        return (int64_t)d;
    return INT64_MIN;
}

static inline OD_HD int32_t od_double_to_i32(double d)
{
    if (d > -2147483649.0 && d < 2147483648.0)
        return (int32_t)d;
    return INT32_MIN;
}

#endif
