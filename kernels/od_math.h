/* od_math.h — per-element math shared by the CPU and CUDA kernels.
 *
 * Invariants:
 *  - Every function is `static inline OD_HD` and pure: it compiles as C11 for
 *    the host and as C++17 host+device code under nvcc, so both backends
 *    compute the same formula for every element.
 *  - Three compute families: _f32 (float16, bfloat16 and float32 are computed
 *    in float and rounded back by the caller), _f64, and _i64 (every integer
 *    dtype and bool is computed in int64 and truncated back by the caller:
 *    wraparound is modular, so truncating a 64-bit result gives the same low
 *    bits PyTorch's narrower arithmetic gives).
 *  - Integer arithmetic never overflows a signed type (UBSan runs in CI):
 *    add/sub/mul/neg/abs/pow go through uint64_t. Integer division functions
 *    have the precondition b != 0; callers check it and report
 *    "ZeroDivisionError" instead (PyTorch raises, it does not return garbage).
 *  - NaN semantics follow PyTorch: maximum/minimum/clamp propagate NaN from
 *    any operand; relu keeps NaN; comparisons with NaN are false except ne.
 *  - float16/bfloat16 conversions come from dispatcher/od_half.h (one copy).
 */
#ifndef OD_MATH_H
#define OD_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "od_half.h"

#define OD_MATH_FN static inline OD_HD

/* ---- integer family (int64 compute, modular wraparound) ---- */

OD_MATH_FN int64_t od_math_wrap_add_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
OD_MATH_FN int64_t od_math_wrap_sub_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
OD_MATH_FN int64_t od_math_wrap_mul_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

/* a + alpha * b, a - alpha * b (torch.add / torch.sub with alpha). */
OD_MATH_FN int64_t od_math_add_i64(int64_t a, int64_t b, int64_t alpha)
{
    return od_math_wrap_add_i64(a, od_math_wrap_mul_i64(alpha, b));
}
OD_MATH_FN int64_t od_math_sub_i64(int64_t a, int64_t b, int64_t alpha)
{
    return od_math_wrap_sub_i64(a, od_math_wrap_mul_i64(alpha, b));
}
OD_MATH_FN int64_t od_math_mul_i64(int64_t a, int64_t b) { return od_math_wrap_mul_i64(a, b); }
OD_MATH_FN int64_t od_math_neg_i64(int64_t a) { return (int64_t)(0u - (uint64_t)a); }
OD_MATH_FN int64_t od_math_abs_i64(int64_t a) { return a < 0 ? od_math_neg_i64(a) : a; }
OD_MATH_FN int64_t od_math_relu_i64(int64_t a) { return a < 0 ? 0 : a; }

/* Truncating division. Precondition: b != 0. INT64_MIN / -1 wraps to
 * INT64_MIN (C leaves it undefined; narrower dtypes never reach it). */
OD_MATH_FN int64_t od_math_div_trunc_i64(int64_t a, int64_t b)
{
    return b == -1 ? od_math_neg_i64(a) : a / b;
}
/* Floor division like torch's div(rounding_mode='floor') / Python's //:
 * rounds toward -inf. Precondition: b != 0. */
OD_MATH_FN int64_t od_math_div_floor_i64(int64_t a, int64_t b)
{
    if (b == -1)
        return od_math_neg_i64(a);
    int64_t q = a / b;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0)))
        q -= 1;
    return q;
}

/* Integer power by squaring with wraparound. Negative exponents follow
 * torch's powi for tensor exponents: 1 -> 1, -1 -> +-1, otherwise 0 (a
 * negative *scalar* exponent is rejected earlier, by the shape function). */
OD_MATH_FN int64_t od_math_pow_i64(int64_t a, int64_t b)
{
    if (b < 0) {
        if (a == 1)
            return 1;
        if (a == -1)
            return (b & 1) ? -1 : 1;
        return 0;
    }
    uint64_t base = (uint64_t)a, r = 1u, e = (uint64_t)b;
    while (e) {
        if (e & 1u)
            r *= base;
        base *= base;
        e >>= 1;
    }
    return (int64_t)r;
}

OD_MATH_FN int64_t od_math_maximum_i64(int64_t a, int64_t b) { return a < b ? b : a; }
OD_MATH_FN int64_t od_math_minimum_i64(int64_t a, int64_t b) { return b < a ? b : a; }
/* clamp: max first, then min, so min > max gives max (torch). */
OD_MATH_FN int64_t od_math_clamp_i64(int64_t x, int64_t lo, int64_t hi)
{
    return od_math_minimum_i64(od_math_maximum_i64(x, lo), hi);
}

/* ---- floating families ---- */

/* The f32 and f64 variants are the same text; one macro keeps them in step.
 * SFX: f32/f64, T: float/double, F(name): the libm function for T. */
#define OD_MATH_FLOAT_FAMILY_(SFX, T)                                                          \
    OD_MATH_FN T od_math_add_##SFX(T a, T b, T alpha) { return a + alpha * b; }                \
    OD_MATH_FN T od_math_sub_##SFX(T a, T b, T alpha) { return a - alpha * b; }                \
    OD_MATH_FN T od_math_mul_##SFX(T a, T b) { return a * b; }                                 \
    OD_MATH_FN T od_math_div_##SFX(T a, T b) { return a / b; }                                 \
    OD_MATH_FN T od_math_neg_##SFX(T a) { return -a; }                                         \
    /* NaN from either side wins (torch.maximum / torch.minimum). */                           \
    OD_MATH_FN T od_math_maximum_##SFX(T a, T b) { return a != a ? a : (b != b ? b : (a < b ? b : a)); } \
    OD_MATH_FN T od_math_minimum_##SFX(T a, T b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); } \
    /* NaN in x, lo or hi gives NaN; lo > hi gives hi (torch.clamp). */                        \
    /* (written so that gcc makes it a max, a min and one blend for NaN    */                  \
    /* bounds; minimum(maximum(x, lo), hi) took 20 instructions per vector */                  \
    /* of mask moves, 1.9x torch's time. A NaN x falls through both.)      */                  \
    OD_MATH_FN T od_math_clamp_##SFX(T x, T lo, T hi)                                          \
    {                                                                                          \
        T m = x < lo ? lo : x;                                                                 \
        m = hi < m ? hi : m;                                                                   \
        return (lo == lo) & (hi == hi) ? m : lo + hi;                                          \
    }                                                                                          \
    /* relu keeps NaN (clamp_min semantics); -0.0 stays -0.0. */                               \
    OD_MATH_FN T od_math_relu_##SFX(T a) { return a < (T)0 ? (T)0 : a; }

OD_MATH_FLOAT_FAMILY_(f32, float)
OD_MATH_FLOAT_FAMILY_(f64, double)
#undef OD_MATH_FLOAT_FAMILY_

OD_MATH_FN float od_math_abs_f32(float a) { return fabsf(a); }
OD_MATH_FN double od_math_abs_f64(double a) { return fabs(a); }

/* Truncating and flooring division of floats, exactly as ATen's
 * div_trunc / div_floor_floating (b == 0 gives the IEEE quotient). */
OD_MATH_FN float od_math_div_trunc_f32(float a, float b) { return truncf(a / b); }
OD_MATH_FN double od_math_div_trunc_f64(double a, double b) { return trunc(a / b); }
/* Branch-free, as ATen's vectorized form is written, so gcc vectorises it
 * (a call under a branch would need Sleef's masked variants). */
#define OD_MATH_DIV_FLOOR_(NAME, T, FMOD, FLOOR, COPYSIGN)                    \
    OD_MATH_FN T NAME(T a, T b)                                              \
    {                                                                        \
        T mod = FMOD(a, b);                                                  \
        T div = (a - mod) / b;                                               \
        div = (mod != (T)0 && ((b < (T)0) != (mod < (T)0))) ? div - (T)1 : div; \
        T fl = FLOOR(div);                                                   \
        fl = div - fl > (T)0.5 ? fl + (T)1 : fl;                             \
        T q = a / b;                                                         \
        fl = div == (T)0 ? COPYSIGN((T)0, q) : fl;                           \
        return b == (T)0 ? q : fl;                                           \
    }
OD_MATH_DIV_FLOOR_(od_math_div_floor_f32, float, fmodf, floorf, copysignf)
OD_MATH_DIV_FLOOR_(od_math_div_floor_f64, double, fmod, floor, copysign)

OD_MATH_FN float od_math_pow_f32(float a, float b) { return powf(a, b); }
OD_MATH_FN double od_math_pow_f64(double a, double b) { return pow(a, b); }

/* The float exp's constants, one list for od_math_exp_core_f32, gelu's
 * tanh form below and cpu/vmath512.c's vector forms (which must keep these
 * bits): adding OD_MATH_EXP_MAGIC (1.5 * 2^23) rounds to an integer; ln 2
 * in two parts for Cody-Waite's reduction; Cephes' polynomial, e^r = 1 + r
 * + r^2 (P0 + P1 r + ... + P5 r^5). */
#define OD_MATH_EXP_MAGIC 12582912.0f
#define OD_MATH_LOG2E_F 1.44269504088896341f
#define OD_MATH_LN2_HI_F 0.693359375f
#define OD_MATH_LN2_LO_F (-2.12194440e-4f)
#define OD_MATH_EXP_P5 1.9875691500e-4f
#define OD_MATH_EXP_P4 1.3981999507e-3f
#define OD_MATH_EXP_P3 8.3334519073e-3f
#define OD_MATH_EXP_P2 4.1665795894e-2f
#define OD_MATH_EXP_P1 1.6666665459e-1f
#define OD_MATH_EXP_P0 5.0000001201e-1f

/* e^x = y * 2^n for x in [-104, 88.8] (no NaN), as y returned and n in
 * *n: Cody-Waite range reduction and Cephes' degree-6 polynomial (~1 ulp),
 * with no calls, no branches and no float->int conversion, so gcc
 * vectorises it. Callers apply 2^n as their range of n allows. */
OD_MATH_FN float od_math_exp_core_f32(float x, int32_t *n)
{
    const float magic = OD_MATH_EXP_MAGIC;
    float t = x * OD_MATH_LOG2E_F + magic;
    float nf = t - magic;
    *n = (int32_t)(od_f32_bits(t) - od_f32_bits(magic)); /* the integer n, from bits */
    float r = x - nf * OD_MATH_LN2_HI_F;
    r = r - nf * OD_MATH_LN2_LO_F;
    float p = OD_MATH_EXP_P5;
    p = p * r + OD_MATH_EXP_P4;
    p = p * r + OD_MATH_EXP_P3;
    p = p * r + OD_MATH_EXP_P2;
    p = p * r + OD_MATH_EXP_P1;
    p = p * r + OD_MATH_EXP_P0;
    return p * r * r + r + 1.0f;
}

/* od_math_exp_core_f32 of max(x, -104) for x <= 88.8 or NaN. The clamp
 * keeps a NaN (it is the operand returned when the comparison fails), so
 * the NaN runs through to the caller's result with no select: n is then any
 * integer, 2^n any scale, and NaN * scale is NaN. */
OD_MATH_FN float od_math_exp_core_low_f32(float x, int32_t *n)
{
    return od_math_exp_core_f32(-104.0f > x ? -104.0f : x, n);
}

/* e^x for x <= 88.8 or NaN, on the host through od_math_exp_core_low_f32,
 * 2^n applied as two factors so subnormal results come out right. Device
 * code uses expf. */
OD_MATH_FN float od_math_exp_upto88_f32(float x)
{
#ifdef __CUDA_ARCH__
    return expf(x);
#else
    int32_t ni;
    float y = od_math_exp_core_low_f32(x, &ni);
    /* 2^n as 2^n1 * 2^n2, both normal floats for n in [-150, 128]. */
    int32_t n1 = ni >> 1;
    int32_t n2 = ni - n1;
    float s1 = od_f32_from_bits(((uint32_t)n1 + 127u) << 23);
    float s2 = od_f32_from_bits(((uint32_t)n2 + 127u) << 23);
    return y * s1 * s2;
#endif
}
/* e^x for x <= 0 or NaN (softmax's x - max): od_math_exp_f32's bits there
 * (every such float compared), with 2^n for n in [-150, 0] as one normal
 * factor 2^(n+64) and 2^-64 applied last, which rounds once as the two
 * factors did: four operations fewer a vector. A NaN gives NaN.
 * Device code uses expf. */
OD_MATH_FN float od_math_exp_nonpos_f32(float x)
{
#ifdef __CUDA_ARCH__
    return expf(x);
#else
    int32_t ni;
    float y = od_math_exp_core_low_f32(x, &ni);
    return y * od_f32_from_bits(((uint32_t)ni + 127u + 64u) << 23) * 5.42101086242752217e-20f; /* 2^-64 */
#endif
}
/* expf's bits on the host (within ~1 ulp of e^x, see the core): the exp
 * above of min(x, 88.8), a NaN kept as there. Written so, not with a final
 * `x != x` select, gcc's loops are 13-16 % shorter (exp, sigmoid over 1e6
 * floats in cache, /v1/bench in turns). */
OD_MATH_FN float od_math_exp_f32(float x)
{
#ifdef __CUDA_ARCH__
    return expf(x);
#else
    return od_math_exp_upto88_f32(88.8f < x ? 88.8f : x);
#endif
}
OD_MATH_FN double od_math_exp_f64(double x) { return exp(x); }

OD_MATH_FN float od_math_log_f32(float a) { return logf(a); }
OD_MATH_FN double od_math_log_f64(double a) { return log(a); }
OD_MATH_FN float od_math_sqrt_f32(float a) { return sqrtf(a); }
OD_MATH_FN double od_math_sqrt_f64(double a) { return sqrt(a); }
OD_MATH_FN float od_math_rsqrt_f32(float a) { return 1.0f / sqrtf(a); }
OD_MATH_FN double od_math_rsqrt_f64(double a) { return 1.0 / sqrt(a); }
OD_MATH_FN float od_math_sin_f32(float a) { return sinf(a); }
OD_MATH_FN double od_math_sin_f64(double a) { return sin(a); }
OD_MATH_FN float od_math_cos_f32(float a) { return cosf(a); }
OD_MATH_FN double od_math_cos_f64(double a) { return cos(a); }
/* tanh's P for |x| < 1, shared with cpu/vmath512.c */
#define OD_MATH_TANH_P7 1.214704348e-04f
#define OD_MATH_TANH_P6 (-8.411372690e-04f)
#define OD_MATH_TANH_P5 3.078596109e-03f
#define OD_MATH_TANH_P4 (-8.595117597e-03f)
#define OD_MATH_TANH_P3 2.178473272e-02f
#define OD_MATH_TANH_P2 (-5.395309897e-02f)
#define OD_MATH_TANH_P1 1.333320039e-01f
#define OD_MATH_TANH_P0 (-3.333332931e-01f)
/* tanhf written to vectorise on the host, as od_math_exp_f32 is: for
 * |x| < 1, x + x^3 P(x^2) with P a degree-7 fit (relative error 4e-10 in
 * double, coefficients rounded to float); beyond, 1 - 2 / (e^2|x| + 1),
 * which rounds to 1 from |x| = 9.01 on. Both run and one is
 * selected, so there is no branch. Measured over every float in [0, 10]
 * against double tanh: at most 0.96 ulp with FMA (the AVX2 and AVX-512
 * clones), 1.10 ulp without, 99.8 % correctly rounded; Sleef's u10 tanhf,
 * torch 1.13's, is within 1.0 ulp at about a third of the throughput
 * (its double-float divisions). tanh(-0) = -0; NaN stays NaN; tiny
 * and subnormal x give x. Device code uses tanhf. */
OD_MATH_FN float od_math_tanh_f32(float x)
{
#ifdef __CUDA_ARCH__
    return tanhf(x);
#else
    float a = fabsf(x), z = a * a;
    float p = OD_MATH_TANH_P7;
    p = p * z + OD_MATH_TANH_P6;
    p = p * z + OD_MATH_TANH_P5;
    p = p * z + OD_MATH_TANH_P4;
    p = p * z + OD_MATH_TANH_P3;
    p = p * z + OD_MATH_TANH_P2;
    p = p * z + OD_MATH_TANH_P1;
    p = p * z + OD_MATH_TANH_P0;
    float small = a + (a * z) * p;
    /* e^2|x|, 2|x| clamped at 88 (NaN too, restored below): 2^n <= 2^127
     * is one normal float, and 2 / (e + 1) is below half an ulp of 1 */
    float u = a + a;
    u = 88.0f < u ? 88.0f : u; /* a NaN stays (as in od_math_exp_core_low_f32): large is NaN */
    int32_t n;
    float e = od_math_exp_core_f32(u, &n);
    e *= od_f32_from_bits(((uint32_t)n + 127u) << 23);
    float large = 1.0f - 2.0f / (e + 1.0f);
    return copysignf(a < 1.0f ? small : large, x);
#endif
}
OD_MATH_FN double od_math_tanh_f64(double a) { return tanh(a); }

/* e^x where only 1 + e^x is wanted: od_math_exp_f32's bits for x >= -86,
 * e^-86 below, where 1 + e^x is 1 either way. 2^n is then applied as
 * (2y) * 2^(n-1), one normal factor for n in [-124, 128] (2y is exact; 2^128
 * itself is not a float, and y * 2^128 is finite for y < 1), which spares
 * the second factor's operations. In cache, where sigmoid is compute-bound,
 * bench_core's sigmoid at 1e6 went from 72.0 to 78.1 GB/s (30 -> 32 % of
 * its paired memcpy; make bench before and after); silu over 256K floats,
 * /v1/bench A/B, 29.8 -> 26.2 us. */
OD_MATH_FN float od_math_exp_for_1p_f32(float x)
{
#ifdef __CUDA_ARCH__
    return expf(x);
#else
    float xc = 88.8f < x ? 88.8f : x; /* a NaN stays, as in od_math_exp_core_low_f32 */
    xc = -86.0f > xc ? -86.0f : xc;
    int32_t n;
    float y = od_math_exp_core_f32(xc, &n);
    return (y + y) * od_f32_from_bits(((uint32_t)n + 126u) << 23);
#endif
}

/* 1 / (1 + e^-x): e^-x overflows to inf for very negative x, giving 0. */
OD_MATH_FN float od_math_sigmoid_f32(float a) { return 1.0f / (1.0f + od_math_exp_for_1p_f32(-a)); }
OD_MATH_FN double od_math_sigmoid_f64(double a) { return 1.0 / (1.0 + exp(-a)); }
/* x * sigmoid(x), written as a division so large negative x gives -0, not NaN. */
OD_MATH_FN float od_math_silu_f32(float a) { return a / (1.0f + od_math_exp_for_1p_f32(-a)); }
OD_MATH_FN double od_math_silu_f64(double a) { return a / (1.0 + exp(-a)); }

/* gelu(approximate='none'): x/2 * (1 + erf(x / sqrt 2)). */
OD_MATH_FN float od_math_gelu_f32(float a) { return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f)); }
OD_MATH_FN double od_math_gelu_f64(double a) { return 0.5 * a * (1.0 + erf(a * 0.70710678118654752440)); }
/* tanh's argument sqrt(2/pi) (x + K1 x^3) */
#define OD_MATH_GELU_K0 0.79788456080286536f
#define OD_MATH_GELU_K1 0.044715f
/* gelu(approximate='tanh'): x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
 * float32 as x * sigmoid(2u), u the tanh's argument (1 + tanh(u) is
 * 2 sigmoid(2u)): one exp and one division, as silu, and the negative tail
 * keeps its digits where 1 + tanh(u) cancels (torch's float result there is
 * a few multiples of 2^-24 |x|, and 0 below x = -6.1). sigmoid(2u) is
 * 1 / (1 + t) for u >= 0 and t / (1 + t) below, t = e^-2|u| <= 1, so
 * nothing overflows; -inf gives NaN and huge negative x -0, as in torch. */
/* On the host the exp is cut to its argument -2|u| <= 0, as the erf form's
 * (cpu/elementwise.c), and written with FMAs: one lower clamp (a NaN there
 * becomes -104, and a carries it), no NaN select, and 2^n as one normal
 * factor 2^(n+64) with 2^-64 applied last, which rounds once where two
 * factors did, so a subnormal e^-2|u| keeps its bits. Over every float
 * against a double reference of the same formula, it is correctly rounded
 * as often as the FMA-free form with od_math_exp_f32 (95.7 %) and its worst
 * case (~200 ulp at x = -10, where float u's rounding is multiplied by
 * 2|u|) is no worse; in cache, one AVX-512 thread, 0.48 -> 0.29 ns per
 * element. Callers are target clones (fmaf is one instruction there; the
 * default clone calls libm's, same bits). Where cpu/vmath512.c runs
 * (contiguous float32 on AVX-512), |x| < 4 takes its table of polynomials
 * instead, and only the rest has these bits. */
OD_MATH_FN float od_math_gelu_tanh_f32(float a)
{
#ifdef __CUDA_ARCH__
    float u = OD_MATH_GELU_K0 * (a + OD_MATH_GELU_K1 * a * a * a);
    float t = od_math_exp_f32(-2.0f * fabsf(u));
#else
    float u = OD_MATH_GELU_K0 * fmaf(OD_MATH_GELU_K1 * a * a, a, a);
    float v = -2.0f * fabsf(u);
    v = v > -104.0f ? v : -104.0f;
    const float magic = OD_MATH_EXP_MAGIC;
    float k = fmaf(v, OD_MATH_LOG2E_F, magic);
    float n = k - magic;
    int32_t ni = (int32_t)(od_f32_bits(k) - od_f32_bits(magic)); /* n, in [-150, 0] */
    float r = fmaf(n, -OD_MATH_LN2_HI_F, v);                      /* Cody-Waite, as od_math_exp_core_f32 */
    r = fmaf(n, -OD_MATH_LN2_LO_F, r);
    float p = OD_MATH_EXP_P5;
    p = fmaf(p, r, OD_MATH_EXP_P4);
    p = fmaf(p, r, OD_MATH_EXP_P3);
    p = fmaf(p, r, OD_MATH_EXP_P2);
    p = fmaf(p, r, OD_MATH_EXP_P1);
    p = fmaf(p, r, OD_MATH_EXP_P0);
    float y = fmaf(p, r * r, r) + 1.0f;
    float t = y * od_f32_from_bits((uint32_t)(ni + 127 + 64) << 23) * 5.42101086242752217e-20f; /* 2^-64 */
#endif
    return a * ((u >= 0.0f ? 1.0f : t) / (1.0f + t));
}
OD_MATH_FN double od_math_gelu_tanh_f64(double a)
{
    double inner = 0.79788456080286535588 * (a + 0.044715 * a * a * a);
    return 0.5 * a * (1.0 + tanh(inner));
}

/* ---- rounding, sign, and the libm functions torch exposes one to one ---- */

/* Integers are already whole: floor/ceil/round/trunc return them (torch). */
OD_MATH_FN int64_t od_math_floor_i64(int64_t a) { return a; }
OD_MATH_FN int64_t od_math_ceil_i64(int64_t a) { return a; }
OD_MATH_FN int64_t od_math_round_i64(int64_t a) { return a; }
OD_MATH_FN int64_t od_math_trunc_i64(int64_t a) { return a; }
OD_MATH_FN float od_math_floor_f32(float a) { return floorf(a); }
OD_MATH_FN double od_math_floor_f64(double a) { return floor(a); }
OD_MATH_FN float od_math_ceil_f32(float a) { return ceilf(a); }
OD_MATH_FN double od_math_ceil_f64(double a) { return ceil(a); }
/* torch.round rounds half to even (nearbyint), unlike C's round. */
OD_MATH_FN float od_math_round_f32(float a) { return rintf(a); }
OD_MATH_FN double od_math_round_f64(double a) { return rint(a); }
OD_MATH_FN float od_math_trunc_f32(float a) { return truncf(a); }
OD_MATH_FN double od_math_trunc_f64(double a) { return trunc(a); }

/* (0 < a) - (a < 0), as ATen writes it: NaN and -0.0 give +0. */
OD_MATH_FN int64_t od_math_sign_i64(int64_t a) { return (int64_t)(0 < a) - (int64_t)(a < 0); }
OD_MATH_FN float od_math_sign_f32(float a) { return (float)(0.0f < a) - (float)(a < 0.0f); }
OD_MATH_FN double od_math_sign_f64(double a) { return (double)(0.0 < a) - (double)(a < 0.0); }

OD_MATH_FN float od_math_log1p_f32(float a) { return log1pf(a); }
OD_MATH_FN double od_math_log1p_f64(double a) { return log1p(a); }
OD_MATH_FN float od_math_expm1_f32(float a) { return expm1f(a); }
OD_MATH_FN double od_math_expm1_f64(double a) { return expm1(a); }
OD_MATH_FN float od_math_erf_f32(float a) { return erff(a); }
OD_MATH_FN double od_math_erf_f64(double a) { return erf(a); }

/* ---- more unary math (issue 19): libm's, in each family ---- */
#define OD_MATH_LIBM1_(name, ff, fd)                                 \
    OD_MATH_FN float od_math_##name##_f32(float a) { return ff(a); } \
    OD_MATH_FN double od_math_##name##_f64(double a) { return fd(a); }
OD_MATH_LIBM1_(acos, acosf, acos)
OD_MATH_LIBM1_(asin, asinf, asin)
OD_MATH_LIBM1_(atan, atanf, atan)
OD_MATH_LIBM1_(asinh, asinhf, asinh)
#ifdef __CUDA_ARCH__
OD_MATH_LIBM1_(acosh, acoshf, acosh)
OD_MATH_LIBM1_(atanh, atanhf, atanh)
#else
/* acosh below 1 and atanh beyond +-1 are NaN, which glibc's wrappers reach
 * through its SVID error handler (__kernel_standard): 4 ns an element for
 * acosh over [0, 1). Those inputs take its answer here, x86's default NaN
 * (sign set, the same bits), without the call. */
OD_MATH_FN float od_math_default_nan_f32(void)
{
    union { uint32_t u; float f; } v = {0xffc00000u};
    return v.f;
}
OD_MATH_FN double od_math_default_nan_f64(void)
{
    union { uint64_t u; double f; } v = {0xfff8000000000000u};
    return v.f;
}
OD_MATH_FN float od_math_acosh_f32(float a) { return a < 1.0f ? od_math_default_nan_f32() : acoshf(a); }
OD_MATH_FN double od_math_acosh_f64(double a) { return a < 1.0 ? od_math_default_nan_f64() : acosh(a); }
OD_MATH_FN float od_math_atanh_f32(float a)
{
    return a > 1.0f || a < -1.0f ? od_math_default_nan_f32() : atanhf(a);
}
OD_MATH_FN double od_math_atanh_f64(double a) { return a > 1.0 || a < -1.0 ? od_math_default_nan_f64() : atanh(a); }
#endif
OD_MATH_LIBM1_(sinh, sinhf, sinh)
OD_MATH_LIBM1_(cosh, coshf, cosh)

/* ---- ATen's vectorized path, where it differs from its scalar one ----
 * A contiguous ATen loop runs its Vectorized (Sleef) kernel on the first
 * n - n % (2 * lanes) elements and the scalar function on the rest; strided
 * loops are all scalar (but for its vml operators: OD_MATH_VML_<fn> below).
 * The CPU loops call od_math_<fn>_vec_<family> there for the functions that
 * OD_MATH_VEC_<fn> marks (kernels/cpu/elementwise.c). */
#define OD_MATH_VEC_fmod ~, 1
#define OD_MATH_VEC_remainder ~, 1
#define OD_MATH_VEC_div_floor ~, 1
/* Sleef itself, where ATen 1.13's Vectorized<float/double> calls it (u10,
 * erfc u15, hypot u05). libsleefgnuabi exports these under the GNU vector
 * ABI names of libm's functions (_ZGVdN8v_tanhf is Sleef_tanhf8_u10), so an
 * alias of libm's scalar function with gcc's simd attribute makes the
 * vectorizer call Sleef on the vectorized path, bit for bit what torch
 * computes, while a scalar call (a tail, a strided loop) is libm's, as
 * ATen's scalar path is. -lsleefgnuabi precedes -lm, so glibc's libmvec,
 * which exports some of the same names, is never chosen. Host only: CUDA
 * calls the plain functions. */
#if !defined(__CUDACC__)
#define OD_MATH_SLEEF_ATTR_ __attribute__((simd("notinbranch"), const, nothrow, leaf))
#define OD_MATH_SLEEF1_(name, ff, fd)                                                          \
    float od_sleef_##ff(float) __asm__(#ff) OD_MATH_SLEEF_ATTR_;                                \
    double od_sleef_##fd(double) __asm__(#fd) OD_MATH_SLEEF_ATTR_;                              \
    OD_MATH_FN float od_math_##name##_vec_f32(float a) { return od_sleef_##ff(a); }          \
    OD_MATH_FN double od_math_##name##_vec_f64(double a) { return od_sleef_##fd(a); }
#define OD_MATH_SLEEF2_(name, ff, fd)                                                          \
    float od_sleef_##ff(float, float) __asm__(#ff) OD_MATH_SLEEF_ATTR_;                         \
    double od_sleef_##fd(double, double) __asm__(#fd) OD_MATH_SLEEF_ATTR_;                      \
    OD_MATH_FN float od_math_##name##_vec_f32(float a, float b) { return od_sleef_##ff(a, b); } \
    OD_MATH_FN double od_math_##name##_vec_f64(double a, double b) { return od_sleef_##fd(a, b); }
#define OD_MATH_VEC_log ~, 1
#define OD_MATH_VEC_sin ~, 1
#define OD_MATH_VEC_cos ~, 1
#define OD_MATH_VEC_tan ~, 1
#define OD_MATH_VEC_tanh ~, 1
#define OD_MATH_VEC_sinh ~, 1
#define OD_MATH_VEC_cosh ~, 1
#define OD_MATH_VEC_acos ~, 1
#define OD_MATH_VEC_asin ~, 1
#define OD_MATH_VEC_atan ~, 1
#define OD_MATH_VEC_exp2 ~, 1
#define OD_MATH_VEC_expm1 ~, 1
#define OD_MATH_VEC_log2 ~, 1
#define OD_MATH_VEC_log10 ~, 1
#define OD_MATH_VEC_log1p ~, 1
#define OD_MATH_VEC_erfc ~, 1
#define OD_MATH_VEC_erf ~, 1
#define OD_MATH_VEC_lgamma ~, 1
#define OD_MATH_VEC_atan2 ~, 1
#define OD_MATH_VEC_hypot ~, 1
OD_MATH_SLEEF1_(log, logf, log)
OD_MATH_SLEEF1_(sin, sinf, sin)
OD_MATH_SLEEF1_(cos, cosf, cos)
OD_MATH_SLEEF1_(tan, tanf, tan)
/* tanh: Sleef for float64 (and mish's float tanh, below); float32's
 * vectorized path is od_math_tanh_f32 (see there), as its scalar one is. */
float od_sleef_tanhf(float) __asm__("tanhf") OD_MATH_SLEEF_ATTR_;
double od_sleef_tanh(double) __asm__("tanh") OD_MATH_SLEEF_ATTR_;
OD_MATH_FN float od_math_tanh_vec_f32(float a) { return od_math_tanh_f32(a); }
OD_MATH_FN double od_math_tanh_vec_f64(double a) { return od_sleef_tanh(a); }
/* sinh and cosh: Sleef overflows where exp does (|x| > ln max), though the
 * exact value stays finite a little further (89.4 in float32, 710.5 in
 * float64); said explicitly, so that a build whose loops gcc leaves scalar
 * (the sanitizers') keeps the edge */
float od_sleef_sinhf(float) __asm__("sinhf") OD_MATH_SLEEF_ATTR_;
double od_sleef_sinh(double) __asm__("sinh") OD_MATH_SLEEF_ATTR_;
float od_sleef_coshf(float) __asm__("coshf") OD_MATH_SLEEF_ATTR_;
double od_sleef_cosh(double) __asm__("cosh") OD_MATH_SLEEF_ATTR_;
/* (r scaled by infinity past the edge, not a select between r and an
 * infinity: gcc sinks a call used on one side of a select into that branch,
 * and a loop with a branch is left scalar; r is nonzero there, of a's sign) */
OD_MATH_FN float od_math_sinh_vec_f32(float a) { float r = od_sleef_sinhf(a); return r * (fabsf(a) > 88.7228394f ? INFINITY : 1.0f); }
OD_MATH_FN double od_math_sinh_vec_f64(double a) { double r = od_sleef_sinh(a); return r * (fabs(a) > 709.782712893384 ? INFINITY : 1.0); }
OD_MATH_FN float od_math_cosh_vec_f32(float a) { float r = od_sleef_coshf(a); return r * (fabsf(a) > 88.7228394f ? INFINITY : 1.0f); }
OD_MATH_FN double od_math_cosh_vec_f64(double a) { double r = od_sleef_cosh(a); return r * (fabs(a) > 709.782712893384 ? INFINITY : 1.0); }
OD_MATH_SLEEF1_(acos, acosf, acos)
OD_MATH_SLEEF1_(asin, asinf, asin)
OD_MATH_SLEEF1_(atan, atanf, atan)
/* (exp2: ATen 1.13's is libm's on both paths; Sleef's is within an ulp of
 * it and 10x faster) */
OD_MATH_SLEEF1_(exp2, exp2f, exp2)
OD_MATH_SLEEF1_(expm1, expm1f, expm1)
OD_MATH_SLEEF1_(log2, log2f, log2)
OD_MATH_SLEEF1_(log10, log10f, log10)
OD_MATH_SLEEF1_(log1p, log1pf, log1p)
/* asinh and atanh in float32: ATen 1.13 calls libm's asinhf / atanhf on
 * both paths, 28 ns an element here. On the vectorized path they run in
 * double around Sleef's double log1p and are rounded once, so within half
 * an ulp and a hair of the exact value (glibc's are within 1-2 ulp):
 *   asinh |x| = log1p(t + t / (1/t + sqrt(1/t^2 + 1))), t = |x|, that is
 *     t^2 / (1 + sqrt(1 + t^2)) written so that 0 and infinity pass;
 *   atanh |x| = log1p(2t / (1 - t)) / 2, glibc's default NaN beyond 1.
 * x's sign is put back, a NaN x gives x + x (as glibc), by bit masks, so
 * gcc keeps the loop vectorised. float64 keeps libm's. */
#define OD_MATH_VEC_asinh ~, 1
#define OD_MATH_VEC_atanh ~, 1
OD_MATH_FN float od_math_vec_odd_f32_(float a, double r, uint32_t special, uint32_t with)
{
    union { float f; uint32_t u; } y = {(float)r}, x = {a}, q = {a + a};
    uint32_t nan = 0u - (uint32_t)(a != a);
    y.u |= x.u & 0x80000000u;
    y.u = (y.u & ~special) | (with & special);
    y.u = (y.u & ~nan) | (q.u & nan);
    return y.f;
}
OD_MATH_FN float od_math_asinh_vec_f32(float a)
{
    double t = fabs((double)a);
    return od_math_vec_odd_f32_(a, od_sleef_log1p(t + t / (1.0 / t + sqrt(1.0 / (t * t) + 1.0))), 0, 0);
}
OD_MATH_FN double od_math_asinh_vec_f64(double a) { return asinh(a); }
OD_MATH_FN float od_math_atanh_vec_f32(float a)
{
    double t = fabs((double)a);
    return od_math_vec_odd_f32_(a, 0.5 * od_sleef_log1p(2.0 * t / (1.0 - t)), 0u - (uint32_t)(t > 1.0), 0xffc00000u);
}
OD_MATH_FN double od_math_atanh_vec_f64(double a) { return od_math_atanh_f64(a); }
OD_MATH_SLEEF1_(erfc, erfcf, erfc)
OD_MATH_SLEEF1_(erf, erff, erf)
/* ATen 1.13 runs these through its vml kernels, Sleef on every element
 * (elementwise.c's DEF_VML); the others split as described above */
#define OD_MATH_VML_erf ~, 1
#define OD_MATH_VML_erfc ~, 1
#define OD_MATH_VML_log ~, 1
#define OD_MATH_VML_log2 ~, 1
#define OD_MATH_VML_log10 ~, 1
#define OD_MATH_VML_log1p ~, 1
#define OD_MATH_VML_sin ~, 1
#define OD_MATH_VML_cos ~, 1
#define OD_MATH_VML_tan ~, 1
#define OD_MATH_VML_acos ~, 1
#define OD_MATH_VML_asin ~, 1
#define OD_MATH_VML_atan ~, 1
#define OD_MATH_VML_expm1 ~, 1
#define OD_MATH_VML_lgamma ~, 1
/* Sleef's sin and cos (float) and cos and tan (double) take a slower
 * argument reduction for the whole vector when one lane is outside
 * (-bound, bound), NaN and infinities included, and other lanes' last bit
 * can move with it: the CPU loops then compute that block in AVX2-wide
 * halves, torch's vectors (DEF_VML). Measured on Debian's libsleef 3.5:
 * float's bound is 125 (tan: none), double's 1e14 (sin: none); the three
 * share them. */
#define OD_MATH_VML_BOUND_sin ~, 1
#define OD_MATH_VML_BOUND_cos ~, 1
#define OD_MATH_VML_BOUND_tan ~, 1
#define OD_MATH_TRIG_BOUND_f32 125.0f
#define OD_MATH_TRIG_BOUND_f64 1e14
OD_MATH_SLEEF1_(lgamma, lgammaf, lgamma)
OD_MATH_SLEEF2_(atan2, atan2f, atan2)
OD_MATH_SLEEF2_(hypot, hypotf, hypot)
/* pow: pow.Tensor_Tensor's loops and pow.Tensor_Scalar's general exponent (elementwise.c) */
OD_MATH_SLEEF2_(pow, powf, pow)
/* mish, logaddexp and logaddexp2 as ATen 1.13's Vectorized kernels compose
 * them (x * tanh(log1p(exp(x))); max + log1p(exp(-|a - b|)), the log2 form
 * times 1 / ln 2). Equal infinities, which ATen blends back in after the
 * call, enter the call as a zero difference instead (inf + ln 2 is inf), so
 * no select follows a call and gcc keeps the loop vectorised. */
double od_sleef_exp(double) __asm__("exp") OD_MATH_SLEEF_ATTR_;
#define OD_MATH_VEC_mish ~, 1
#define OD_MATH_VEC_logaddexp ~, 1
#define OD_MATH_VEC_logaddexp2 ~, 1
OD_MATH_FN float od_math_mish_vec_f32(float a) { return a * od_sleef_tanhf(od_sleef_log1pf(od_math_exp_f32(a))); }
OD_MATH_FN double od_math_mish_vec_f64(double a) { return a * od_sleef_tanh(od_sleef_log1p(od_sleef_exp(a))); }
/* softplus as ATen 1.13's Vectorized kernel: blendv(log1p(exp(x * beta)) / beta, x, x * beta >
 * threshold) on Sleef. Blended by bit masks, not selected: after a select gcc sinks the calls into
 * one arm, a branch it cannot vectorise (the loop ran scalar, 4.6x torch's time). */
OD_MATH_FN float od_math_softplus_vec_f32(float x, const float *p)
{
    union { float f; uint32_t u; } a = {x}, b = {od_sleef_log1pf(od_math_exp_f32(x * p[0])) / p[0]};
    uint32_t m = 0u - (uint32_t)(x * p[0] > p[1]);
    a.u = (a.u & m) | (b.u & ~m);
    return a.f;
}
OD_MATH_FN double od_math_softplus_vec_f64(double x, const double *p)
{
    union { double f; uint64_t u; } a = {x}, b = {od_sleef_log1p(od_sleef_exp(x * p[0])) / p[0]};
    uint64_t m = 0u - (uint64_t)(x * p[0] > p[1]);
    a.u = (a.u & m) | (b.u & ~m);
    return a.f;
}
#define OD_MATH_VEC_softplus ~, 1
#define OD_MATH_LOGADDEXP_VEC_(SFX, T, FABS, EXP, LOG1P, SCALE)                                 \
    OD_MATH_FN T od_math_logaddexp##SFX(T a, T b)                                                 \
    {                                                                                              \
        T d = (FABS(a) == (T)INFINITY) & (a == b) ? (T)0 : -FABS(a - b);                       \
        return (a < b ? b : a) + LOG1P(EXP(d)) * (SCALE); /* NaN either way, as d is */        \
    }
OD_MATH_LOGADDEXP_VEC_(_vec_f32, float, fabsf, od_math_exp_f32, od_sleef_log1pf, 1.0f)
OD_MATH_LOGADDEXP_VEC_(_vec_f64, double, fabs, od_sleef_exp, od_sleef_log1p, 1.0)
OD_MATH_LOGADDEXP_VEC_(2_vec_f32, float, fabsf, od_sleef_exp2f, od_sleef_log1pf, (float)(1.0 / 0.693147180559945309417))
OD_MATH_LOGADDEXP_VEC_(2_vec_f64, double, fabs, od_sleef_exp2, od_sleef_log1p, 1.0 / 0.693147180559945309417)
#undef OD_MATH_LOGADDEXP_VEC_
/* logit's vectorized path as ATen 1.13's Vectorized kernel: min(max(x, lo),
 * hi), then Sleef's log of x / (1 - x) (libm's logf kept the loop scalar) */
#define OD_MATH_LOGIT_VEC_(SFX, T, LOG)                                                          \
    OD_MATH_FN T od_math_logit_vec_##SFX(T x, const T *p)                                        \
    {                                                                                            \
        T z = p[0] > x ? p[0] : x;                                                               \
        z = p[1] < z ? p[1] : z;                                                                 \
        return LOG(z / ((T)1 - z));                                                              \
    }
OD_MATH_LOGIT_VEC_(f32, float, od_sleef_logf)
OD_MATH_LOGIT_VEC_(f64, double, od_sleef_log)
#undef OD_MATH_LOGIT_VEC_
#define OD_MATH_VEC_logit ~, 1
/* erfinv on float32's vectorized path. ATen 1.13's erfinv is scalar
 * (calc_erfinv: erf and exp twice per element) and the server's scalar
 * form takes up to four Halley steps; this one is branch-free, so gcc runs
 * it on Sleef's vectors: Giles' single-precision approximation ("Approximating
 * the erfinv function", 2010; relative error ~1e-7) in double, then one
 * Halley step on erf, which cubes that error. erf alone, without the erfc
 * form near 1 (Sleef's erfc took 40 % of the time): there erf's 1e-16 over
 * erf'(x) >= 4e-7 leaves x off by 3e-10 at most, still far below float32's
 * rounding. Outside (-1, 1) the calls see
 * 0 and bit masks put NaN or +-inf back after them (a select there would be
 * sunk into a branch, and the loop left scalar). */
/* (sqrt as a simd call too: the builtin sets errno, a branch gcc cannot vectorise) */
double od_sleef_sqrt(double) __asm__("sqrt") OD_MATH_SLEEF_ATTR_;
#define OD_MATH_VEC_erfinv ~, 1
/* c ? a : b by bit masks, which gcc keeps after the calls */
OD_MATH_FN double od_math_blend_f64_(bool c, double a, double b)
{
    union { double f; uint64_t u; } x = {a}, y = {b};
    uint64_t m = 0u - (uint64_t)c;
    x.u = (x.u & m) | (y.u & ~m);
    return x.f;
}
/* always inlined: too big for gcc's inliner in the AVX clones, and a call
 * in the loop leaves it scalar */
__attribute__((always_inline)) OD_MATH_FN float od_math_erfinv_vec_f32(float yf)
{
    const double y = yf, ay = fabs(y), a = ay < 1.0 ? ay : 0.0;
    double w = -od_sleef_log((1.0 - a) * (1.0 + a));
    double u = w - 2.5, p1 = 2.81022636e-08;
    p1 = 3.43273939e-07 + p1 * u;
    p1 = -3.5233877e-06 + p1 * u;
    p1 = -4.39150654e-06 + p1 * u;
    p1 = 0.00021858087 + p1 * u;
    p1 = -0.00125372503 + p1 * u;
    p1 = -0.00417768164 + p1 * u;
    p1 = 0.246640727 + p1 * u;
    p1 = 1.50140941 + p1 * u;
    double v = od_sleef_sqrt(w) - 3.0, p2 = -0.000200214257;
    p2 = 0.000100950558 + p2 * v;
    p2 = 0.00134934322 + p2 * v;
    p2 = -0.00367342844 + p2 * v;
    p2 = 0.00573950773 + p2 * v;
    p2 = -0.0076224613 + p2 * v;
    p2 = 0.00943887047 + p2 * v;
    p2 = 1.00167406 + p2 * v;
    p2 = 2.83297682 + p2 * v;
    double x = od_math_blend_f64_(w < 5.0, p1, p2) * a;
    double f = od_sleef_erf(x) - a;
    double d = od_sleef_exp(-x * x) * 1.12837916709551257390; /* erf'(x) */
    x -= f / (d + x * f);
    double r = od_math_blend_f64_(ay < 1.0, copysign(x, y), ay == 1.0 ? copysign(INFINITY, y) : NAN);
    return (float)r;
}
OD_MATH_FN double od_math_erfinv_f64(double y);
OD_MATH_FN double od_math_erfinv_vec_f64(double y) { return od_math_erfinv_f64(y); }
#undef OD_MATH_SLEEF1_
#undef OD_MATH_SLEEF2_
#undef OD_MATH_SLEEF_ATTR_
#endif
OD_MATH_LIBM1_(tan, tanf, tan)
OD_MATH_LIBM1_(exp2, exp2f, exp2)
OD_MATH_LIBM1_(log2, log2f, log2)
OD_MATH_LIBM1_(log10, log10f, log10)
OD_MATH_LIBM1_(erfc, erfcf, erfc)
#undef OD_MATH_LIBM1_
OD_MATH_FN float od_math_reciprocal_f32(float a) { return 1.0f / a; }
OD_MATH_FN double od_math_reciprocal_f64(double a) { return 1.0 / a; }
/* x * (pi / 180) with the constant in the dtype, as ATen multiplies */
OD_MATH_FN float od_math_deg2rad_f32(float a) { return a * (float)(3.14159265358979323846 / 180.0); }
OD_MATH_FN double od_math_deg2rad_f64(double a) { return a * (3.14159265358979323846 / 180.0); }
OD_MATH_FN float od_math_rad2deg_f32(float a) { return a * (float)(180.0 / 3.14159265358979323846); }
OD_MATH_FN double od_math_rad2deg_f64(double a) { return a * (180.0 / 3.14159265358979323846); }
OD_MATH_FN float od_math_frac_f32(float a) { return a - truncf(a); }
OD_MATH_FN double od_math_frac_f64(double a) { return a - trunc(a); }
/* sgn of a real number is sign */
OD_MATH_FN int64_t od_math_sgn_i64(int64_t a) { return od_math_sign_i64(a); }
OD_MATH_FN float od_math_sgn_f32(float a) { return od_math_sign_f32(a); }
OD_MATH_FN double od_math_sgn_f64(double a) { return od_math_sign_f64(a); }
/* signbit: -0.0 and -NaN count */
OD_MATH_FN bool od_math_signbit_i64(int64_t a) { return a < 0; }
/* (copysign rather than signbit(), which makes gcc 12's AVX-512 clones fail) */
OD_MATH_FN bool od_math_signbit_f32(float a) { return copysignf(1.0f, a) < 0.0f; }
OD_MATH_FN bool od_math_signbit_f64(double a) { return copysign(1.0, a) < 0.0; }
/* relu6(x + 3) / 6; x * that; x * tanh(softplus(x)) (ATen's formulas) */
/* std::min/std::max order, so NaN stays NaN */
OD_MATH_FN float od_math_relu6_f32(float a) { return a < 0.0f ? 0.0f : 6.0f < a ? 6.0f : a; }
OD_MATH_FN double od_math_relu6_f64(double a) { return a < 0.0 ? 0.0 : 6.0 < a ? 6.0 : a; }
OD_MATH_FN float od_math_hardsigmoid_f32(float a) { return od_math_relu6_f32(a + 3.0f) / 6.0f; }
OD_MATH_FN double od_math_hardsigmoid_f64(double a) { return od_math_relu6_f64(a + 3.0) / 6.0; }
OD_MATH_FN float od_math_hardswish_f32(float a) { return a * od_math_relu6_f32(a + 3.0f) / 6.0f; }
OD_MATH_FN double od_math_hardswish_f64(double a) { return a * od_math_relu6_f64(a + 3.0) / 6.0; }
OD_MATH_FN float od_math_mish_f32(float a) { return a * tanhf(log1pf(expf(a))); }
OD_MATH_FN double od_math_mish_f64(double a) { return a * tanh(log1p(exp(a))); }

/* ---- special functions and predicates ---- */
OD_MATH_FN float od_math_lgamma_f32(float a) { return lgammaf(a); }
OD_MATH_FN double od_math_lgamma_f64(double a) { return lgamma(a); }
/* digamma as ATen's calc_digamma: +-inf at +-0 (the sign opposite to x's),
 * NaN at negative integers, reflection below 0, recurrence up to 10, then
 * the asymptotic series. */
#define OD_MATH_DIGAMMA_(SFX, T, F, PSI10)                                                       \
    OD_MATH_FN T od_math_digamma_##SFX(T x)                                                      \
    {                                                                                            \
        static const T A[] = {(T)8.33333333333333333333E-2, (T)-2.10927960927960927961E-2,       \
                              (T)7.57575757575757575758E-3, (T)-4.16666666666666666667E-3,       \
                              (T)3.96825396825396825397E-3, (T)-8.33333333333333333333E-3,       \
                              (T)8.33333333333333333333E-2};                                     \
        T result = 0;                                                                            \
        if (x == 0)                                                                              \
            return copysign##F((T)INFINITY, -x);                                                 \
        if (x < 0) {                                                                             \
            if (x == trunc##F(x))                                                                \
                return (T)NAN;                                                                   \
            T q, r = modf##F(x, &q);                                                             \
            (void)q;                                                                             \
            /* the reflection term in double, float32 too, as ATen */                            \
            return od_math_digamma_##SFX(1 - x) - (T)(3.14159265358979323846 /                   \
                                                      tan(3.14159265358979323846 * (double)r));  \
        }                                                                                        \
        while (x < 10) {                                                                         \
            result -= 1 / x;                                                                     \
            x += 1;                                                                              \
        }                                                                                        \
        if (x == 10)                                                                             \
            return result + (PSI10);                                                             \
        T y = 0;                                                                                 \
        if (x < (T)1.0e17) {                                                                     \
            T z = 1 / (x * x), p = A[0];                                                         \
            for (int i = 1; i <= 6; i++)                                                         \
                p = p * z + A[i];                                                                \
            y = z * p;                                                                           \
        }                                                                                        \
        return result + log##F(x) - ((T)0.5 / x) - y;                                            \
    }
OD_MATH_DIGAMMA_(f32, float, f, 2.25175258906672110764f)
OD_MATH_DIGAMMA_(f64, double, , 2.25175258906672110764)
#undef OD_MATH_DIGAMMA_
/* ---- parameterised activations (ops.def's OD_EWP lines): p[k] is the
 * operator's parameter k as od_ew_params_of converts it; ATen 1.13's CPU
 * formulas, NaN included ---- */
#define OD_MATH_ACT_(SFX, T, F)                                                                   \
    /* clamp (torch's hardtanh): NaN limits give NaN */                                        \
    OD_MATH_FN T od_math_hardtanh_##SFX(T x, const T *p) { return od_math_clamp_##SFX(x, p[0], p[1]); } \
    /* alpha, scale, input_scale: exp(x * is) - 1, not expm1 (elu(-0.0) is */                \
    /* 0 * alpha * scale) */                                                                    \
    OD_MATH_FN T od_math_elu_##SFX(T x, const T *p)                                              \
    {                                                                                            \
        return x <= (T)0 ? (exp##F(x * p[2]) - (T)1) * (p[0] * p[1]) : x * p[1];                 \
    }                                                                                            \
    OD_MATH_FN T od_math_leaky_relu_##SFX(T x, const T *p) { return x > (T)0 ? x : x * p[0]; }   \
    /* beta, threshold */                                                                        \
    OD_MATH_FN T od_math_softplus_##SFX(T x, const T *p)                                         \
    {                                                                                            \
        return x * p[0] > p[1] ? x : log1p##F(exp##F(x * p[0])) / p[0];                          \
    }                                                                                            \
    /* lambd: +0 in the middle, NaN included */                                                 \
    OD_MATH_FN T od_math_softshrink_##SFX(T x, const T *p)                                       \
    {                                                                                            \
        return x > p[0] ? x - p[0] : (x < -p[0] ? x + p[0] : (T)0);                               \
    }                                                                                            \
    OD_MATH_FN T od_math_hardshrink_##SFX(T x, const T *p)                                       \
    {                                                                                            \
        return x >= -p[0] && x <= p[0] ? (T)0 : x;                                               \
    }                                                                                            \
    /* threshold, value: NaN stays */                                                           \
    OD_MATH_FN T od_math_threshold_##SFX(T x, const T *p) { return x <= p[0] ? p[1] : x; }       \
    /* lo = eps, hi = 1 - eps (NaN: no clamp); log(x / (1 - x)), inf at 1. */                 \
    /* The scalar loop tests lo first, the vectorized one is min(max(x, lo), */                \
    /* hi): they differ where lo > hi (eps > 0.5) */                                             \
    OD_MATH_FN T od_math_logit_##SFX(T x, const T *p)                                            \
    {                                                                                            \
        T z = x < p[0] ? p[0] : (x > p[1] ? p[1] : x);                                           \
        return z == (T)1 ? (T)INFINITY : log##F(z / ((T)1 - z));                                 \
    }                                                                                            \
    /* nan, posinf, neginf replacements */                                                      \
    OD_MATH_FN T od_math_nan_to_num_##SFX(T x, const T *p)                                       \
    {                                                                                            \
        return x != x ? p[0] : (x == (T)INFINITY ? p[1] : (x == -(T)INFINITY ? p[2] : x));       \
    }
OD_MATH_ACT_(f32, float, f)
OD_MATH_ACT_(f64, double, )
#undef OD_MATH_ACT_
/* elu's vectorized path, ATen 1.13's Vectorized kernel: x * scale where
 * x > 0, else (exp(x * input_scale) - 1) * (alpha * scale), with
 * od_math_exp_f32 (float64: Sleef's exp, blended by bit masks so that gcc
 * keeps the call vectorised; libm's expf left the loop scalar, 10x torch's
 * time on normal data). ATen skips the exp for a vector with no x <= 0; the
 * CPU loops skip it for a block where od_math_elu_is_easy holds for every
 * element, computing od_math_elu_easy there (OD_MATH_EASY_elu): the same
 * bits as the whole expression. */
#if !defined(__CUDACC__)
#define OD_MATH_VEC_elu ~, 1
#define OD_MATH_EASY_elu ~, 1
OD_MATH_FN float od_math_elu_vec_f32(float x, const float *p)
{
    return x > 0.0f ? x * p[1] : (od_math_exp_f32(x * p[2]) - 1.0f) * (p[0] * p[1]);
}
OD_MATH_FN double od_math_elu_vec_f64(double x, const double *p)
{
    union { double f; uint64_t u; } a = {x * p[1]}, b = {(od_sleef_exp(x * p[2]) - 1.0) * (p[0] * p[1])};
    uint64_t m = 0u - (uint64_t)(x > 0.0);
    a.u = (a.u & m) | (b.u & ~m);
    return a.f;
}
OD_MATH_FN int od_math_elu_is_easy_f32(float x) { return x > 0.0f; }
OD_MATH_FN int od_math_elu_is_easy_f64(double x) { return x > 0.0; }
OD_MATH_FN float od_math_elu_easy_f32(float x, const float *p) { return x * p[1]; }
OD_MATH_FN double od_math_elu_easy_f64(double x, const double *p) { return x * p[1]; }
#endif

/* round.decimals, ATen's round_decimals_kernel: p[0] = 10^|decimals| in
 * the dtype, p[1] = 1 for negative decimals (divide first), p[2] = 1 for
 * bfloat16, whose c10 arithmetic rounds the product (quotient) to bfloat16
 * before nearbyint; half to even, as nearbyint in the default mode */
OD_MATH_FN float od_math_round_dec_f32(float x, const float *p)
{
    float t = p[1] != 0.0f ? x / p[0] : x * p[0];
    if (p[2] != 0.0f)
        t = od_bf16_to_float(od_float_to_bf16(t));
    t = rintf(t);
    return p[1] != 0.0f ? t * p[0] : t / p[0];
}
OD_MATH_FN double od_math_round_dec_f64(double x, const double *p)
{
    double t = rint(p[1] != 0.0 ? x / p[0] : x * p[0]);
    return p[1] != 0.0 ? t * p[0] : t / p[0];
}
OD_MATH_FN int64_t od_math_hardtanh_i64(int64_t x, const int64_t *p) { return od_math_clamp_i64(x, p[0], p[1]); }
OD_MATH_FN int64_t od_math_threshold_i64(int64_t x, const int64_t *p) { return x <= p[0] ? p[1] : x; }
OD_MATH_FN int64_t od_math_nan_to_num_i64(int64_t x, const int64_t *p) { (void)p; return x; }
/* x ^ p[0]: 1 for bool (not), -1 for the integers (~x) */
OD_MATH_FN int64_t od_math_bitwise_not_i64(int64_t x, const int64_t *p) { return x ^ p[0]; }

/* ---- erfinv, i0, polygamma ---- */
/* erfinv: a first guess (the series about 0 below 0.5, Winitzki's closed
 * form above), then Halley steps on erf, or on erfc past 0.5 where 1 - |y|
 * is exact; float32 rounds the double result. */
OD_MATH_FN double od_math_erfinv_f64(double y)
{
    if (!(y >= -1.0 && y <= 1.0))
        return NAN;
    if (y == 1.0 || y == -1.0)
        return y * INFINITY;
    if (y == 0.0)
        return y;
    double ay = fabs(y), x;
    const double spi2 = 0.88622692545275801365; /* sqrt(pi) / 2 */
    if (ay < 0.5) {
        double y2 = ay * ay;
        x = spi2 * ay * (1.0 + y2 * (0.26179938779914943654 + y2 * 0.14393173084921978670));
    } else {
        const double a = 0.147, tpa = 2.0 / (3.14159265358979323846 * a);
        double w = log((1.0 - ay) * (1.0 + ay)), b = tpa + 0.5 * w;
        x = sqrt(sqrt(b * b - w / a) - b);
    }
    for (int it = 0; it < 4; it++) {
        double d = exp(-x * x) / spi2; /* erf'(x) */
        double f = ay < 0.5 ? erf(x) - ay : (1.0 - ay) - erfc(x);
        double step = f / (d + x * f);
        x -= step;
        if (fabs(step) <= 1e-17 * x)
            break;
    }
    return y < 0 ? -x : x;
}
OD_MATH_FN float od_math_erfinv_f32(float y) { return (float)od_math_erfinv_f64((double)y); }

/* The modified Bessel function I0: its power series up to |x| = 30, the
 * asymptotic series e^x / sqrt(2 pi x) * sum (2k-1)!!^2 / (k! (8x)^k) past
 * it; e^x overflows where ATen's does (past 709.78, 88.72 in float32). */
OD_MATH_FN double od_math_i0_f64(double x)
{
    double ax = fabs(x);
    if (ax != ax || ax == INFINITY) /* ATen's e^x / sqrt(x) is inf / inf there */
        return NAN;
    if (ax <= 30.0) {
        double q = 0.25 * ax * ax, term = 1.0, sum = 1.0;
        for (int k = 1; k < 200; k++) {
            term *= q / ((double)k * (double)k);
            sum += term;
            if (term < 1e-17 * sum)
                break;
        }
        return sum;
    }
    double term = 1.0, sum = 1.0;
    for (int k = 1; k < 60; k++) {
        double odd = 2.0 * k - 1.0;
        term *= odd * odd / (8.0 * ax * k);
        sum += term;
        if (term < 1e-17 * sum)
            break;
    }
    return exp(ax) * (sum / sqrt(6.28318530717958647693 * ax));
}
OD_MATH_FN float od_math_i0_f32(float x)
{
    if (fabsf(x) > 88.7228317f && fabsf(x) != INFINITY)
        return INFINITY;
    return (float)od_math_i0_f64((double)x);
}

/* trigamma: reflection below 1/2, six steps of the recurrence, then the
 * asymptotic series 1/x + 1/2x^2 + 1/6x^3 - 1/30x^5 + 1/42x^7. In two
 * parts: _refl, the reflection's term (0 - pi^2 / sin^2(pi x), the only
 * libm call), and _rest, which takes it as the running result and has no
 * branch or call, so the CPU loops can run it vectorised after a scalar
 * pass of _refl (OD_MATH_SPLIT_polygamma): the same operations either way. */
#define OD_MATH_TRIGAMMA_(SFX, T, F)                                                             \
    OD_MATH_FN T od_math_trigamma_refl_##SFX(T x)                                                \
    {                                                                                            \
        const T pi = (T)3.14159265358979323846;                                                  \
        if (!(x < (T)0.5))                                                                       \
            return 0;                                                                            \
        T sp = sin##F(pi * x);                                                                   \
        return 0 - pi * pi / (sp * sp);                                                          \
    }                                                                                            \
    /* (the six steps written out: as a loop, gcc leaves the CPU's pass scalar) */              \
    OD_MATH_FN T od_math_trigamma_rest_##SFX(T x, T result)                                      \
    {                                                                                            \
        T sign = x < (T)0.5 ? (T)-1 : (T)1;                                                      \
        x = x < (T)0.5 ? 1 - x : x;                                                              \
        result += 1 / (x * x);                                                                   \
        x += 1;                                                                                  \
        result += 1 / (x * x);                                                                   \
        x += 1;                                                                                  \
        result += 1 / (x * x);                                                                   \
        x += 1;                                                                                  \
        result += 1 / (x * x);                                                                   \
        x += 1;                                                                                  \
        result += 1 / (x * x);                                                                   \
        x += 1;                                                                                  \
        result += 1 / (x * x);                                                                   \
        x += 1;                                                                                  \
        const T ixx = 1 / (x * x);                                                               \
        result += (1 + 1 / (2 * x) + ixx * ((T)1 / 6 - ixx * ((T)1 / 30 - ixx * ((T)1 / 42)))) / x; \
        return sign * result;                                                                    \
    }                                                                                            \
    OD_MATH_FN T od_math_trigamma_##SFX(T x) { return od_math_trigamma_rest_##SFX(x, od_math_trigamma_refl_##SFX(x)); }
/* Hurwitz zeta(s, q) by Euler-Maclaurin summation (Cephes' zeta): nine
 * terms, then the integral and the Bernoulli corrections B[k] = (2k)!/B_2k.
 * float32 sums in double, as ATen's CPU zeta accumulates (acc_type). */
/* polygamma(n, x): digamma, trigamma, else (-1)^(n+1) n! zeta(n+1, x);
 * p[0] = n, p[1] = 1 for the general formula (its n an int, as ATen's) */
#define OD_MATH_POLYGAMMA_(SFX, T, F)                                                            \
    OD_MATH_FN T od_math_polygamma_##SFX(T x, const T *p)                                        \
    {                                                                                            \
        T n = p[0];                                                                              \
        if (p[1] == 0)                                                                           \
            return n == 0 ? od_math_digamma_##SFX(x) : od_math_trigamma_##SFX(x);                \
        T sign = fmod##F(n, (T)2) != 0 ? (T)1 : (T)-1;                                            \
        return sign * exp##F(lgamma##F(n + 1)) * od_math_zeta_##SFX(n + 1, x);                   \
    }
#define OD_MATH_ZETA_(SFX, T, F)                                                                 \
    OD_MATH_FN T od_math_zeta_##SFX(T s, T q)                                                    \
    {                                                                                            \
        const T B[12] = {(T)12.0, (T)-720.0, (T)30240.0, (T)-1209600.0, (T)47900160.0,           \
                         (T)-1.8924375803183791606e9, (T)7.47242496e10, (T)-2.950130727918164224e12, \
                         (T)1.1646782814350067249e14, (T)-4.5979787224074726105e15,                 \
                         (T)1.8152105401943546773e17, (T)-7.1661652561756670113e18};                \
        const T eps = (T)1.11022302462515654042e-16;                                             \
        if (s == 1)                                                                              \
            return (T)INFINITY;                                                                  \
        if (s < 1)                                                                               \
            return (T)NAN;                                                                       \
        if (q <= 0) {                                                                            \
            if (q == floor##F(q))                                                                \
                return (T)INFINITY;                                                              \
            if (s != floor##F(s))                                                                \
                return (T)NAN;                                                                   \
        }                                                                                        \
        T sum = pow##F(q, -s), a = q, b = 0;                                                     \
        int i = 0;                                                                               \
        while (i < 9 || a <= (T)9) {                                                             \
            i += 1;                                                                              \
            a += 1;                                                                              \
            b = pow##F(a, -s);                                                                   \
            sum += b;                                                                            \
            if (-eps * sum < b && b < eps * sum)                                                 \
                return sum;                                                                      \
        }                                                                                        \
        T w = a;                                                                                 \
        sum += b * w / (s - 1);                                                                  \
        sum -= (T)0.5 * b;                                                                       \
        T f = 1, k = 0;                                                                          \
        for (int j = 0; j < 12; j++) {                                                           \
            f *= s + k;                                                                          \
            b /= w;                                                                              \
            T t = f * b / B[j];                                                                  \
            sum += t;                                                                            \
            t = fabs##F(t / sum);                                                                \
            if (t < eps)                                                                         \
                return sum;                                                                      \
            k += 1;                                                                              \
            f *= s + k;                                                                          \
            b /= w;                                                                              \
            k += 1;                                                                              \
        }                                                                                        \
        return sum;                                                                              \
    }
OD_MATH_TRIGAMMA_(f32, float, f)
OD_MATH_TRIGAMMA_(f64, double, )
OD_MATH_ZETA_(f64, double, )
OD_MATH_FN float od_math_zeta_f32(float s, float q) { return (float)od_math_zeta_f64((double)s, (double)q); }
OD_MATH_POLYGAMMA_(f32, float, f)
OD_MATH_POLYGAMMA_(f64, double, )
/* polygamma(1, x), trigamma, in the CPU loops' two passes (elementwise.c's
 * DEF_SPLIT), where _splits says the parameters select it: _pre is the
 * scalar pass, _post the vectorised one */
#if !defined(__CUDACC__)
#define OD_MATH_SPLIT_polygamma ~, 1
#define OD_MATH_POLYGAMMA_SPLIT_(SFX, T)                                                         \
    OD_MATH_FN bool od_math_polygamma_splits_##SFX(const T *p) { return p[1] == 0 && p[0] == 1; } \
    OD_MATH_FN T od_math_polygamma_pre_##SFX(T x, const T *p)                                    \
    {                                                                                            \
        (void)p;                                                                                 \
        return od_math_trigamma_refl_##SFX(x);                                                   \
    }                                                                                            \
    OD_MATH_FN T od_math_polygamma_post_##SFX(T x, T pre, const T *p)                            \
    {                                                                                            \
        (void)p;                                                                                 \
        return od_math_trigamma_rest_##SFX(x, pre);                                              \
    }
OD_MATH_POLYGAMMA_SPLIT_(f32, float)
OD_MATH_POLYGAMMA_SPLIT_(f64, double)
#undef OD_MATH_POLYGAMMA_SPLIT_
#endif
#undef OD_MATH_TRIGAMMA_
#undef OD_MATH_ZETA_
#undef OD_MATH_POLYGAMMA_
/* sinc: sin(pi x) / (pi x), 1 at 0, as ATen computes it */
OD_MATH_FN float od_math_sinc_f32(float a)
{
    if (a == 0.0f)
        return 1.0f;
    float p = 3.14159265358979323846f * a;
    return sinf(p) / p;
}
OD_MATH_FN double od_math_sinc_f64(double a)
{
    if (a == 0.0)
        return 1.0;
    double p = 3.14159265358979323846 * a;
    return sin(p) / p;
}
/* (comparisons rather than isnan()/isinf(), as for signbit) */
#define OD_MATH_PRED_(SFX, T)                                                                    \
    OD_MATH_FN bool od_math_isnan_##SFX(T a) { return a != a; }                                  \
    OD_MATH_FN bool od_math_isinf_##SFX(T a) { return a == (T)INFINITY || a == -(T)INFINITY; }   \
    OD_MATH_FN bool od_math_isposinf_##SFX(T a) { return a == (T)INFINITY; }                     \
    OD_MATH_FN bool od_math_isneginf_##SFX(T a) { return a == -(T)INFINITY; }                    \
    OD_MATH_FN bool od_math_isfinite_##SFX(T a) { return a - a == (T)0; }
OD_MATH_PRED_(f32, float)
OD_MATH_PRED_(f64, double)
#undef OD_MATH_PRED_
OD_MATH_FN bool od_math_isnan_i64(int64_t a) { (void)a; return false; }
OD_MATH_FN bool od_math_isinf_i64(int64_t a) { (void)a; return false; }
OD_MATH_FN bool od_math_isposinf_i64(int64_t a) { (void)a; return false; }
OD_MATH_FN bool od_math_isneginf_i64(int64_t a) { (void)a; return false; }
OD_MATH_FN bool od_math_isfinite_i64(int64_t a) { (void)a; return true; }
/* fmax/fmin ignore a NaN operand; of equal operands (+0 and -0) they return
 * self, as torch 1.13's build of std::fmax does (glibc's returns other) */
OD_MATH_FN float od_math_fmax_f32(float a, float b) { return a >= b || b != b ? a : b; }
OD_MATH_FN double od_math_fmax_f64(double a, double b) { return a >= b || b != b ? a : b; }
OD_MATH_FN int64_t od_math_fmax_i64(int64_t a, int64_t b) { return a > b ? a : b; }
OD_MATH_FN float od_math_fmin_f32(float a, float b) { return a <= b || b != b ? a : b; }
OD_MATH_FN double od_math_fmin_f64(double a, double b) { return a <= b || b != b ? a : b; }
OD_MATH_FN int64_t od_math_fmin_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- more binary math (issue 19) ---- */
OD_MATH_FN float od_math_atan2_f32(float a, float b) { return atan2f(a, b); }
OD_MATH_FN double od_math_atan2_f64(double a, double b) { return atan2(a, b); }
OD_MATH_FN float od_math_hypot_f32(float a, float b) { return hypotf(a, b); }
OD_MATH_FN double od_math_hypot_f64(double a, double b) { return hypot(a, b); }
OD_MATH_FN float od_math_copysign_f32(float a, float b) { return copysignf(a, b); }
OD_MATH_FN double od_math_copysign_f64(double a, double b) { return copysign(a, b); }
/* lerp (ATen 1.13's lerp kernels, in opmath): self + weight * (end - self)
 * for weight < 0.5 (negative weights too), else end - (end - self) * (1 -
 * weight). torch's CPU build contracts both to one fused multiply-add (gcc's
 * default fp-contract in its AVX2 kernels, scalar and vector paths alike),
 * so they are written as fma here. */
OD_MATH_FN float od_math_lerp_f32(float a, float b, float w)
{
    return w < 0.5f ? fmaf(w, b - a, a) : fmaf(-(b - a), 1.0f - w, b);
}
OD_MATH_FN double od_math_lerp_f64(double a, double b, double w)
{
    return w < 0.5 ? fma(w, b - a, a) : fma(-(b - a), 1.0 - w, b);
}
/* addcmul: self + value * t1 * t2, contracted as fma(value * t1, t2, self)
 * (integers wrap); addcdiv: self + value * t1 / t2 (nothing to contract) */
OD_MATH_FN float od_math_addcmul_f32(float a, float b, float c, float v) { return fmaf(v * b, c, a); }
OD_MATH_FN double od_math_addcmul_f64(double a, double b, double c, double v) { return fma(v * b, c, a); }
OD_MATH_FN int64_t od_math_addcmul_i64(int64_t a, int64_t b, int64_t c, int64_t v)
{
    return (int64_t)((uint64_t)a + (uint64_t)v * (uint64_t)b * (uint64_t)c);
}
OD_MATH_FN float od_math_addcdiv_f32(float a, float b, float c, float v) { return a + v * b / c; }
OD_MATH_FN double od_math_addcdiv_f64(double a, double b, double c, double v) { return a + v * b / c; }
/* nextafter: one exact answer (torch: Sleef's on its vector path, libm's on
 * the tail). On the host, from the bits, with selects only, so gcc
 * vectorises it (libm's call per element was 22x torch at 1e6): one step
 * away from zero where a < b agrees with a's sign, else toward it; from
 * +-0 the smallest subnormal of b's sign; b where a == b; a + b (NaN)
 * where either is NaN. */
#ifdef __CUDA_ARCH__
OD_MATH_FN float od_math_nextafter_f32(float a, float b) { return nextafterf(a, b); }
OD_MATH_FN double od_math_nextafter_f64(double a, double b) { return nextafter(a, b); }
#else
#define OD_MATH_NEXTAFTER_(SFX, T, U, SIGN)                                                      \
    OD_MATH_FN T od_math_nextafter_##SFX(T a, T b)                                             \
    {                                                                                          \
        union { T f; U u; } x = {a}, y = {b}, nan = {a + b}, r;                                \
        U step = ((U)(a < b) ^ (x.u >> (sizeof(U) * 8 - 1))) ? (U)1 : (U)-1;                  \
        r.u = (x.u & ~(SIGN)) == 0 ? (y.u & (SIGN)) | 1 : x.u + step;                          \
        r.u = a == b ? y.u : r.u;                                                              \
        r.u = a != a || b != b ? nan.u : r.u;                                                  \
        return r.f;                                                                            \
    }
OD_MATH_NEXTAFTER_(f32, float, uint32_t, 0x80000000u)
OD_MATH_NEXTAFTER_(f64, double, uint64_t, 0x8000000000000000ull)
#undef OD_MATH_NEXTAFTER_
#endif
/* c10's nextafter(BFloat16, BFloat16) (musl's algorithm on the 16 bits of
 * from and to), for the CPU and CUDA bfloat16 kernels */
OD_MATH_FN uint16_t od_math_nextafter_bf16(uint16_t from, uint16_t to)
{
    const uint16_t sign = 0x8000;
    float f = od_f32_from_bits((uint32_t)from << 16), t = od_f32_from_bits((uint32_t)to << 16);
    if (f != f || t != t)
        return 0x7FC0; /* from + to: NaN, which c10::BFloat16 rounds to 0x7FC0 */
    if (from == to)
        return from;
    uint16_t af = from & (uint16_t)~sign, at = to & (uint16_t)~sign;
    if (af == 0)
        return at == 0 ? to : (uint16_t)((to & sign) | 1);
    if (af > at || ((from ^ to) & sign))
        return (uint16_t)(from - 1);
    return (uint16_t)(from + 1);
}
/* heaviside: values where self is 0 (-0.0 too), else self > 0 (NaN gives 0) */
OD_MATH_FN float od_math_heaviside_f32(float a, float b) { return a == 0 ? b : (float)(a > 0); }
OD_MATH_FN double od_math_heaviside_f64(double a, double b) { return a == 0 ? b : (double)(a > 0); }
OD_MATH_FN int64_t od_math_heaviside_i64(int64_t a, int64_t b) { return a == 0 ? b : (int64_t)(a > 0); }
/* log(exp a + exp b) without overflow; equal infinities give themselves */
OD_MATH_FN float od_math_logaddexp_f32(float a, float b)
{
    float m = fmaxf(a, b);
    return (isinf(a) && a == b) ? a : m + log1pf(expf(-fabsf(a - b)));
}
OD_MATH_FN double od_math_logaddexp_f64(double a, double b)
{
    double m = fmax(a, b);
    return (isinf(a) && a == b) ? a : m + log1p(exp(-fabs(a - b)));
}
OD_MATH_FN float od_math_logaddexp2_f32(float a, float b)
{
    float m = fmaxf(a, b);
    return (isinf(a) && a == b) ? a : m + log1pf(exp2f(-fabsf(a - b))) / 0.693147180559945309f;
}
OD_MATH_FN double od_math_logaddexp2_f64(double a, double b)
{
    double m = fmax(a, b);
    return (isinf(a) && a == b) ? a : m + log1p(exp2(-fabs(a - b))) / 0.693147180559945309417;
}
/* x * log(y), 0 where x == 0 unless y is NaN */
OD_MATH_FN float od_math_xlogy_f32(float a, float b) { return isnan(b) ? NAN : a == 0.0f ? 0.0f : a * logf(b); }
OD_MATH_FN double od_math_xlogy_f64(double a, double b) { return isnan(b) ? NAN : a == 0.0 ? 0.0 : a * log(b); }

/* ---- logical and bitwise (NaN is true, as any non-zero) ---- */
#define OD_MATH_LOGICAL_(SFX, T)                                                              \
    OD_MATH_FN bool od_math_logical_not_##SFX(T a) { return a == (T)0; }                     \
    OD_MATH_FN bool od_math_logical_and_##SFX(T a, T b) { return (a != (T)0) & (b != (T)0); }  \
    OD_MATH_FN bool od_math_logical_or_##SFX(T a, T b) { return (a != (T)0) | (b != (T)0); }   \
    OD_MATH_FN bool od_math_logical_xor_##SFX(T a, T b) { return (a != (T)0) != (b != (T)0); }
OD_MATH_LOGICAL_(i64, int64_t)
OD_MATH_LOGICAL_(f32, float)
OD_MATH_LOGICAL_(f64, double)
#undef OD_MATH_LOGICAL_
OD_MATH_FN int64_t od_math_bitwise_and_i64(int64_t a, int64_t b) { return a & b; }
/* Shifts as PyTorch defines them from 2.0 on (1.13's are C++'s, undefined
 * for a count < 0 or >= the width): past the width, << gives 0 and >> the
 * sign; below it the result is the same for every integer dtype once
 * truncated back (an int8 1 << 9 is 0 as in torch). */
OD_MATH_FN int64_t od_math_lshift_i64(int64_t a, int64_t b)
{
    return b < 0 || b >= 64 ? 0 : (int64_t)((uint64_t)a << b);
}
OD_MATH_FN int64_t od_math_rshift_i64(int64_t a, int64_t b) { return b < 0 || b >= 64 ? (a < 0 ? -1 : 0) : a >> b; }
/* ATen's calc_gcd and lcm in a signed integer type of `bits` bits (8, 16,
 * 32, 64; 64 for uint8 and bool, whose values are never negative): |x| is
 * taken in that width, so |INT16_MIN| stays INT16_MIN and Euclid's steps
 * go negative as ATen's do (gcd(-32768, 6) is -2 in int16), and lcm's
 * a / g * b and its |.| wrap in that width. Values are the width's,
 * sign-extended. x % -1 is 0 without computing INT64_MIN % -1. The CPU
 * loops (elementwise.c) and the CUDA ones (ew_impl.cuh) both call the
 * _bits forms with the compute dtype's width. */
OD_MATH_FN int64_t od_math_wrap_bits_i64(uint64_t v, int bits)
{
    return bits == 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}
OD_MATH_FN int64_t od_math_abs_bits_i64(int64_t a, int bits)
{
    return od_math_wrap_bits_i64(a < 0 ? 0 - (uint64_t)a : (uint64_t)a, bits);
}
/* The trailing zero bits of x != 0 */
#ifdef __CUDA_ARCH__
#define OD_MATH_CTZ64_(x) (__ffsll((long long)(x)) - 1)
#else
#define OD_MATH_CTZ64_(x) __builtin_ctzll(x)
#endif
/* gcd of two values >= 0 by Stein's binary method: shifts and subtractions
 * where each of Euclid's steps divides (an idiv per step); for values >= 0
 * both give the one gcd, gcd(0, b) = b included. vmath512.c runs it on 16
 * lanes. */
OD_MATH_FN uint64_t od_math_gcd_binary_u64(uint64_t a, uint64_t b)
{
    if (a == 0 || b == 0)
        return a | b;
    int k = OD_MATH_CTZ64_(a | b);
    a >>= OD_MATH_CTZ64_(a);
    do { /* a odd; which is larger is a coin toss, so selects, not a branch */
        b >>= OD_MATH_CTZ64_(b);
        uint64_t lo = a < b ? a : b;
        b = (a < b ? b : a) - lo;
        a = lo;
    } while (b != 0);
    return a << k;
}
OD_MATH_FN int64_t od_math_gcd_bits_i64(int64_t a, int64_t b, int bits)
{
    a = od_math_abs_bits_i64(a, bits);
    b = od_math_abs_bits_i64(b, bits);
    if (a >= 0 && b >= 0) /* not the width's minimum, whose |.| stays negative */
        return (int64_t)od_math_gcd_binary_u64((uint64_t)a, (uint64_t)b);
    if (bits <= 32) { /* the same steps on 32-bit registers: a 32-bit division costs less */
        int32_t x = (int32_t)a, y = (int32_t)b;
        while (x != 0) {
            int32_t c = x;
            x = x == -1 ? 0 : y % x;
            y = c;
        }
        return y;
    }
    while (a != 0) {
        int64_t c = a;
        a = a == -1 ? 0 : b % a;
        b = c;
    }
    return b;
}
OD_MATH_FN int64_t od_math_lcm_bits_i64(int64_t a, int64_t b, int bits)
{
    int64_t g = od_math_gcd_bits_i64(a, b, bits);
    if (g == 0)
        return 0;
    /* a / g * b and |.| run in int for the types narrower than int (C's
     * promotion): lcm(10, 97) in int8 is (int8)970 = -54 */
    int w = bits < 32 ? 32 : bits;
    /* g == 1 (coprime, the common case) skips the division */
    int64_t q = g == 1    ? a
                : g == -1 ? od_math_neg_i64(a)
                : bits <= 32 ? (int64_t)((int32_t)a / (int32_t)g)
                             : a / g;
    return od_math_abs_bits_i64(od_math_wrap_bits_i64((uint64_t)q * (uint64_t)b, w), w);
}
OD_MATH_FN int64_t od_math_gcd_i64(int64_t a, int64_t b) { return od_math_gcd_bits_i64(a, b, 64); }
OD_MATH_FN int64_t od_math_lcm_i64(int64_t a, int64_t b) { return od_math_lcm_bits_i64(a, b, 64); }
OD_MATH_FN int64_t od_math_bitwise_or_i64(int64_t a, int64_t b) { return a | b; }
OD_MATH_FN int64_t od_math_bitwise_xor_i64(int64_t a, int64_t b) { return a ^ b; }

/* ---- fmod and remainder ----
 * fmod's result takes the dividend's sign (C's % and fmod); remainder's the
 * divisor's (Python's %), computed as ATen does: fmod, then + b when the
 * signs differ (so remainder(-1, inf) is inf, as in torch). Integer
 * precondition: b != 0 (callers report ZeroDivisionError); b == -1 gives 0
 * without the INT64_MIN % -1 trap (torch 1.13 itself dies of SIGFPE there). */
OD_MATH_FN int64_t od_math_fmod_i64(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
OD_MATH_FN int64_t od_math_remainder_i64(int64_t a, int64_t b)
{
    int64_t r = od_math_fmod_i64(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
OD_MATH_FN float od_math_fmod_f32(float a, float b) { return fmodf(a, b); }
OD_MATH_FN double od_math_fmod_f64(double a, double b) { return fmod(a, b); }
#define OD_MATH_REMAINDER_(NAME, T, FMOD)                           \
    OD_MATH_FN T NAME(T a, T b)                                     \
    {                                                               \
        T r = FMOD(a, b);                                           \
        return (r != (T)0 && ((r < (T)0) != (b < (T)0))) ? r + b : r; \
    }
OD_MATH_REMAINDER_(od_math_remainder_f32, float, fmodf)
OD_MATH_REMAINDER_(od_math_remainder_f64, double, fmod)

/* fmod, remainder and floor division on ATen's vectorized path: the same
 * formulas over Sleef's fmod. Its NaN where |a / b| overflows is also said
 * explicitly (od_math_fmod_vec_nan_*), so a build whose loops gcc leaves
 * scalar (the sanitizers', calling libm's fmod) keeps it. */
/* Sleef's fmod is NaN where |a / b| overflows (a subnormal b first scales
 * both by 2^25, or 2^54 in double), which fmod, remainder and floor division
 * all inherit; |a| < |b| returns a. */
#define OD_MATH_FMOD_VEC_NAN_(SFX, T, FABS, TMIN, SCALE)                                         \
    OD_MATH_FN bool od_math_fmod_vec_nan_##SFX(T a, T b)                                           \
    {                                                                                              \
        /* branch-free (& not &&), so the loops around it vectorise */                          \
        T nu = FABS(a), de = FABS(b);                                                              \
        T s = de < (TMIN) ? (SCALE) : (T)1;                                                        \
        T q = (nu * s) * (1 / (de * s));                                                           \
        return isfinite(nu) & isfinite(de) & (de != 0) & !(nu < de) & isinf(q);                    \
    }
OD_MATH_FMOD_VEC_NAN_(f32, float, fabsf, 1.17549435e-38f, 33554432.0f)
OD_MATH_FMOD_VEC_NAN_(f64, double, fabs, 2.2250738585072014e-308, 18014398509481984.0)
#undef OD_MATH_FMOD_VEC_NAN_
#if !defined(__CUDACC__)
float od_sleef_fmodf(float, float) __asm__("fmodf") __attribute__((simd("notinbranch"), const, nothrow, leaf));
double od_sleef_fmod(double, double) __asm__("fmod") __attribute__((simd("notinbranch"), const, nothrow, leaf));
/* (r times NaN or 1, not a select: see sinh) */
OD_MATH_FN float od_sleef_fmod_nan_f32(float a, float b) { float r = od_sleef_fmodf(a, b); return r * (od_math_fmod_vec_nan_f32(a, b) ? NAN : 1.0f); }
OD_MATH_FN double od_sleef_fmod_nan_f64(double a, double b) { double r = od_sleef_fmod(a, b); return r * (od_math_fmod_vec_nan_f64(a, b) ? NAN : 1.0); }
OD_MATH_FN float od_math_fmod_vec_f32(float a, float b) { return od_sleef_fmod_nan_f32(a, b); }
OD_MATH_FN double od_math_fmod_vec_f64(double a, double b) { return od_sleef_fmod_nan_f64(a, b); }
OD_MATH_REMAINDER_(od_math_remainder_vec_f32, float, od_sleef_fmod_nan_f32)
OD_MATH_REMAINDER_(od_math_remainder_vec_f64, double, od_sleef_fmod_nan_f64)
OD_MATH_DIV_FLOOR_(od_math_div_floor_vec_f32, float, od_sleef_fmod_nan_f32, floorf, copysignf)
OD_MATH_DIV_FLOOR_(od_math_div_floor_vec_f64, double, od_sleef_fmod_nan_f64, floor, copysign)
#endif
/* integers have no vectorized difference */
OD_MATH_FN int64_t od_math_fmod_vec_i64(int64_t a, int64_t b) { return od_math_fmod_i64(a, b); }
OD_MATH_FN int64_t od_math_remainder_vec_i64(int64_t a, int64_t b) { return od_math_remainder_i64(a, b); }
OD_MATH_FN int64_t od_math_div_floor_vec_i64(int64_t a, int64_t b) { return od_math_div_floor_i64(a, b); }

/* ---- comparisons (one per family; NaN compares false except ne) ---- */
#define OD_MATH_CMP_(SFX, T)                                                 \
    OD_MATH_FN bool od_math_eq_##SFX(T a, T b) { return a == b; }            \
    OD_MATH_FN bool od_math_ne_##SFX(T a, T b) { return a != b; }            \
    OD_MATH_FN bool od_math_lt_##SFX(T a, T b) { return a < b; }             \
    OD_MATH_FN bool od_math_le_##SFX(T a, T b) { return a <= b; }            \
    OD_MATH_FN bool od_math_gt_##SFX(T a, T b) { return a > b; }             \
    OD_MATH_FN bool od_math_ge_##SFX(T a, T b) { return a >= b; }
OD_MATH_CMP_(i64, int64_t)
OD_MATH_CMP_(f32, float)
OD_MATH_CMP_(f64, double)
#undef OD_MATH_CMP_

/* ---- dtype conversions of one element (torch's static_cast on x86) ---- */

/* Floating -> narrower integer: via int32 for dtypes of <= 32 bits, as C++
 * compilers do (out-of-range and NaN give INT32_MIN's low bits). */
OD_MATH_FN int32_t od_math_f64_to_i32(double d)
{
    if (d > -2147483649.0 && d < 2147483648.0)
        return (int32_t)d;
    return INT32_MIN;
}

/* ---- counter-based random numbers (added by the CUDA backend) ----
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC'11): element i of a rand/randn call with (seed, offset) depends on
 * (seed, offset + i) alone, so any device, any thread layout and the host
 * produce the same tensor. */
OD_MATH_FN void od_math_philox4x32_raw(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The stream of (seed, counter): counter in words 0-1, subsequence 0. */
OD_MATH_FN void od_math_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4])
{
    uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0u, 0u};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    od_math_philox4x32_raw(ctr, key, out);
}

/* One random element as a double: uniform on [0, 1) with `bits` bits of
 * precision (8 bfloat16, 11 float16, 24 float32, 53 float64), so rounding to
 * the dtype is exact and never reaches 1.0; or, when normal, a standard
 * normal by Box-Muller from two 53-bit uniforms (u1 in (0, 1]). */
OD_MATH_FN double od_math_random_f64(uint64_t seed, uint64_t counter, bool normal, int bits)
{
    uint32_t w[4];
    od_math_philox4x32(seed, counter, w);
    const double two_m53 = 1.1102230246251565e-16; /* 2^-53 */
    if (normal) {
        uint64_t a = (((uint64_t)w[0] << 32) | w[1]) >> 11;
        uint64_t b = (((uint64_t)w[2] << 32) | w[3]) >> 11;
        double u1 = (double)(a + 1) * two_m53;
        double u2 = (double)b * two_m53;
        return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
    }
    if (bits >= 53)
        return (double)((((uint64_t)w[0] << 32) | w[1]) >> 11) * two_m53;
    if (bits < 1)
        bits = 1;
    return (double)(w[0] >> (32 - bits)) / (double)((uint64_t)1 << bits);
}

#endif
