/* vmath512.c — exp, sigmoid, silu, tanh and both gelu forms over
 * contiguous float32 on AVX-512: elementwise.c's contiguous loops of those
 * operators call these first and run their own loop when they return false.
 *
 * Invariants:
 *  - Every result has the bits of the function elementwise.c's AVX-512
 *    clone applies (od_math.h's; gelu's ew_gelu_erf_f32), vector body or
 *    scalar tail: the same operations in the same order, with an FMA
 *    wherever gcc contracts one there. All 2^32 floats were compared for
 *    each function when this was written; test_cpu_elementwise compares
 *    calls with these loops on and off each run. A tensor's values
 *    therefore do not depend on which path ran.
 *  - Only where those clones exist (OD_CPU_V4_CLONES), the CPU runs them
 *    (x86-64-v4) and od_cpu_vm512_enable has not turned them off (tests,
 *    benchmarks); elsewhere each function returns false and writes nothing.
 *  - y and x are the same array or do not overlap: each block of 64 is
 *    loaded whole before it is stored.
 *  - With stream (the output is OD_CPU_STREAM_BYTES or more), y's whole
 *    lines are written with streaming stores, fenced before the call
 *    returns: a plain store first reads the line it fills.
 *
 * Why by hand: 2^n is one vscalefps, correctly rounded with subnormal
 * results (so the bits of od_math's two normal factors), where gcc spends
 * eight operations; and four vectors step together (EACH) so that one's
 * chain of dependent FMAs overlaps the others'. One thread, 16K floats in
 * cache, ns per element, the clone's loop against these: exp 0.155 ->
 * 0.084, sigmoid 0.160 -> 0.119, silu 0.168 -> 0.121, tanh 0.241 -> 0.213
 * (0.078 where a block's |x| all lie below 1), gelu 0.263 -> 0.209, gelu
 * tanh 0.280 -> 0.216.
 */
#include <stdatomic.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_math.h"

#if OD_CPU_V4_CLONES
#include <immintrin.h>

#define VM_FN __attribute__((target("arch=x86-64-v4"), always_inline)) static inline
#define VM_K 4 /* vectors that step together */
#define VM_BLOCK (16 * VM_K)
typedef struct {
    __m512 v[VM_K];
} vm_f;
#define EACH(...)                                 \
    do {                                          \
        _Pragma("GCC unroll 4")                   \
        for (int k = 0; k < VM_K; k++) {          \
            __VA_ARGS__;                          \
        }                                         \
    } while (0)

VM_FN vm_f splat(float c)
{
    vm_f r;
    EACH(r.v[k] = _mm512_set1_ps(c));
    return r;
}
#define VM_OP2_(name, intr)                              \
    VM_FN vm_f name(vm_f a, vm_f b)                      \
    {                                                    \
        vm_f r;                                          \
        EACH(r.v[k] = intr(a.v[k], b.v[k]));             \
        return r;                                        \
    }
#define VM_OP3_(name, intr)                              \
    VM_FN vm_f name(vm_f a, vm_f b, vm_f c)              \
    {                                                    \
        vm_f r;                                          \
        EACH(r.v[k] = intr(a.v[k], b.v[k], c.v[k]));     \
        return r;                                        \
    }
VM_OP2_(vadd, _mm512_add_ps)
VM_OP2_(vsub, _mm512_sub_ps)
VM_OP2_(vmul, _mm512_mul_ps)
VM_OP2_(vdiv, _mm512_div_ps)
VM_OP2_(vscalef, _mm512_scalef_ps)
/* vmin(a, b) and vmax(a, b) give b where either is NaN: with a constant
 * bound first, a NaN x passes through, as od_math's `c < x ? c : x` does. */
VM_OP2_(vmin, _mm512_min_ps)
VM_OP2_(vmax, _mm512_max_ps)
VM_OP3_(vfma, _mm512_fmadd_ps)    /* a * b + c */
VM_OP3_(vfnma, _mm512_fnmadd_ps)  /* c - a * b */
VM_OP3_(vfnms, _mm512_fnmsub_ps)  /* -(a * b) - c */

/* |a| with b's sign bit */
VM_FN vm_f copysign_(vm_f a, vm_f b)
{
    vm_f r;
    EACH(__m512i s = _mm512_ternarylogic_epi32(_mm512_castps_si512(a.v[k]), _mm512_castps_si512(b.v[k]),
                                               _mm512_set1_epi32(0x7fffffff), 0xe4); /* mask ? a : b */
         r.v[k] = _mm512_castsi512_ps(s));
    return r;
}

/* od_math_exp_core_f32 of x, or of -x when neg (written as the same
 * roundings without negating x, so a NaN keeps its sign as there): y
 * returned, n in *n as a float. */
VM_FN vm_f exp_core(vm_f x, vm_f *n, int neg)
{
    const vm_f magic = splat(OD_MATH_EXP_MAGIC);
    vm_f t = neg ? vfnma(x, splat(OD_MATH_LOG2E_F), magic) : vfma(x, splat(OD_MATH_LOG2E_F), magic);
    *n = vsub(t, magic);
    vm_f r = neg ? vfnms(*n, splat(OD_MATH_LN2_HI_F), x) : vfnma(*n, splat(OD_MATH_LN2_HI_F), x);
    r = vfnma(*n, splat(OD_MATH_LN2_LO_F), r);
    vm_f p = vfma(splat(OD_MATH_EXP_P5), r, splat(OD_MATH_EXP_P4));
    p = vfma(p, r, splat(OD_MATH_EXP_P3));
    p = vfma(p, r, splat(OD_MATH_EXP_P2));
    p = vfma(p, r, splat(OD_MATH_EXP_P1));
    p = vfma(p, r, splat(OD_MATH_EXP_P0));
    return vadd(vfma(r, vmul(r, p), r), splat(1.0f)); /* p * r * r + r + 1, contracted as gcc does */
}

/* od_math_exp_f32 */
VM_FN vm_f vm_exp(vm_f x)
{
    vm_f n, y = exp_core(vmax(splat(-104.0f), vmin(splat(88.8f), x)), &n, 0);
    return vscalef(y, n);
}
/* 1 + od_math_exp_for_1p_f32(-x) */
VM_FN vm_f one_plus_exp_neg(vm_f x)
{
    vm_f n, y = exp_core(vmin(splat(86.0f), vmax(splat(-88.8f), x)), &n, 1);
    return vadd(vscalef(y, n), splat(1.0f));
}
/* od_math_sigmoid_f32, od_math_silu_f32 */
VM_FN vm_f vm_sigmoid(vm_f x) { return vdiv(splat(1.0f), one_plus_exp_neg(x)); }
VM_FN vm_f vm_silu(vm_f x) { return vdiv(x, one_plus_exp_neg(x)); }
/* od_math_tanh_f32's two formulas of a = |x|: for a < 1 ... */
VM_FN vm_f tanh_small(vm_f a)
{
    vm_f z = vmul(a, a);
    vm_f p = vfma(splat(OD_MATH_TANH_P7), z, splat(OD_MATH_TANH_P6));
    p = vfma(p, z, splat(OD_MATH_TANH_P5));
    p = vfma(p, z, splat(OD_MATH_TANH_P4));
    p = vfma(p, z, splat(OD_MATH_TANH_P3));
    p = vfma(p, z, splat(OD_MATH_TANH_P2));
    p = vfma(p, z, splat(OD_MATH_TANH_P1));
    p = vfma(p, z, splat(OD_MATH_TANH_P0));
    return vfma(vmul(a, z), p, a);
}
/* ... and beyond (a NaN too) */
VM_FN vm_f tanh_large(vm_f a)
{
    vm_f n, e = exp_core(vmin(splat(88.0f), vadd(a, a)), &n, 0);
    return vsub(splat(1.0f), vdiv(splat(2.0f), vadd(vscalef(e, n), splat(1.0f))));
}
/* od_math_tanh_f32: both formulas and a select per lane, as there, but
 * only the one a block needs when all its lanes need the same (activations
 * often lie in one range: in [0.05, 0.95), 0.213 -> 0.079 ns per element). */
VM_FN vm_f vm_tanh(vm_f x)
{
    vm_f a, r;
    __mmask16 m[VM_K], all = 0xffff, any = 0;
    EACH(a.v[k] = _mm512_abs_ps(x.v[k]); m[k] = _mm512_cmp_ps_mask(a.v[k], _mm512_set1_ps(1.0f), _CMP_LT_OQ);
         all &= m[k]; any |= m[k]);
    if (all == 0xffff) {
        r = tanh_small(a);
    } else if (any == 0) {
        r = tanh_large(a);
    } else {
        vm_f small = tanh_small(a), large = tanh_large(a);
        EACH(r.v[k] = _mm512_mask_blend_ps(m[k], large.v[k], small.v[k]));
    }
    return copysign_(r, x);
}

/* elementwise.c's ew_gelu_erf_f32 (gelu on oneDNN's path): x Phi(x), with
 * Phi(-t) = e^(-t^2/2) R(t); see there for the method. Its
 * ((x nu y / d) 2^(n+64)) 2^-64 is one scaling by 2^n here: the first
 * product is exact (normal), so both round once. */
VM_FN vm_f vm_gelu_erf(vm_f x)
{
    vm_f ax, t, h, l, n;
    EACH(ax.v[k] = _mm512_abs_ps(x.v[k]));
    t = vmin(ax, splat(14.4f)); /* NaN: 14.4 */
    h = vmul(t, t);
    EACH(l.v[k] = _mm512_fmsub_ps(t.v[k], t.v[k], h.v[k])); /* t^2 = h + l exactly */
    const vm_f magic = splat(OD_MATH_EXP_MAGIC);
    n = vsub(vfma(h, splat(-0.5f * OD_MATH_LOG2E_F), magic), magic);
    vm_f r = vfma(n, splat(-OD_MATH_LN2_HI_F), vmul(splat(-0.5f), h));
    r = vfma(n, splat(-OD_MATH_LN2_LO_F), r);
    r = vfma(l, splat(-0.5f), r);
    vm_f p = vfma(splat(OD_CPU_GELU_ERF_E4), r, splat(OD_CPU_GELU_ERF_E3));
    p = vfma(p, r, splat(OD_CPU_GELU_ERF_E2));
    p = vfma(p, r, splat(OD_CPU_GELU_ERF_E1));
    p = vfma(p, r, splat(OD_CPU_GELU_ERF_E0));
    vm_f y = vadd(vfma(p, vmul(r, r), r), splat(1.0f));
    vm_f nu = vfma(splat(OD_CPU_GELU_ERF_N4), t, splat(OD_CPU_GELU_ERF_N3));
    nu = vfma(nu, t, splat(OD_CPU_GELU_ERF_N2));
    nu = vfma(nu, t, splat(OD_CPU_GELU_ERF_N1));
    nu = vfma(nu, t, splat(OD_CPU_GELU_ERF_N0));
    vm_f d = vfma(splat(OD_CPU_GELU_ERF_D5), t, splat(OD_CPU_GELU_ERF_D4));
    d = vfma(d, t, splat(OD_CPU_GELU_ERF_D3));
    d = vfma(d, t, splat(OD_CPU_GELU_ERF_D2));
    d = vfma(d, t, splat(OD_CPU_GELU_ERF_D1));
    d = vfma(d, t, splat(1.0f));
    vm_f q = vscalef(vdiv(vmul(vmul(x, nu), y), d), n), r0;
    EACH(__mmask16 in = _mm512_cmp_ps_mask(ax.v[k], _mm512_set1_ps(14.4f), _CMP_LT_OQ);
         q.v[k] = _mm512_maskz_mov_ps(in, q.v[k]); /* 0 for |x| >= 14.4 and NaN */
         __mmask16 neg = _mm512_cmp_ps_mask(x.v[k], _mm512_setzero_ps(), _CMP_LT_OQ);
         /* x - x: 0 but NaN for -inf; q + 0 and x - q: +0.0 for -0.0 */
         r0.v[k] = _mm512_mask_blend_ps(neg, _mm512_sub_ps(x.v[k], q.v[k]),
                                        _mm512_add_ps(q.v[k], _mm512_sub_ps(x.v[k], x.v[k]))));
    return r0;
}
/* od_math_gelu_tanh_f32: x sigmoid(2u), the exp cut to -2|u| <= 0 as
 * there; its (y 2^(n+64)) 2^-64 is one scaling by 2^n (y 2^(n+64) is exact). */
VM_FN vm_f vm_gelu_tanh(vm_f a)
{
    vm_f u = vmul(splat(OD_MATH_GELU_K0), vfma(vmul(vmul(splat(OD_MATH_GELU_K1), a), a), a, a));
    vm_f v, n;
    EACH(v.v[k] = _mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_abs_ps(u.v[k])));
    v = vmax(v, splat(-104.0f)); /* NaN: -104, as v > -104 ? v : -104 */
    const vm_f magic = splat(OD_MATH_EXP_MAGIC);
    n = vsub(vfma(v, splat(OD_MATH_LOG2E_F), magic), magic);
    vm_f r = vfma(n, splat(-OD_MATH_LN2_HI_F), v);
    r = vfma(n, splat(-OD_MATH_LN2_LO_F), r);
    vm_f p = vfma(splat(OD_MATH_EXP_P5), r, splat(OD_MATH_EXP_P4));
    p = vfma(p, r, splat(OD_MATH_EXP_P3));
    p = vfma(p, r, splat(OD_MATH_EXP_P2));
    p = vfma(p, r, splat(OD_MATH_EXP_P1));
    p = vfma(p, r, splat(OD_MATH_EXP_P0));
    vm_f t = vscalef(vadd(vfma(p, vmul(r, r), r), splat(1.0f)), n), num;
    EACH(__mmask16 pos = _mm512_cmp_ps_mask(u.v[k], _mm512_setzero_ps(), _CMP_GE_OQ);
         num.v[k] = _mm512_mask_blend_ps(pos, t.v[k], _mm512_set1_ps(1.0f)));
    return vmul(a, vdiv(num, vadd(splat(1.0f), t)));
}

/* y[0..n) = F(x[0..n)) in blocks of VM_BLOCK; n < VM_BLOCK through a
 * zero-padded block (a stream's head before y's first line, the tail).
 * stream: the whole blocks from y's first 64-byte line on are stored
 * around the cache, and fenced before returning (as softmax.c's rows). */
#define VM_LOOP_(name, F)                                                                 \
    __attribute__((target("arch=x86-64-v4"))) static void name##_part(float *y, const float *x, int64_t n) \
    {                                                                                     \
        float b[VM_BLOCK] = {0};                                                          \
        vm_f v;                                                                           \
        memcpy(b, x, (size_t)n * sizeof(float));                                          \
        EACH(v.v[k] = _mm512_loadu_ps(b + 16 * k));                                       \
        v = F(v);                                                                         \
        EACH(_mm512_storeu_ps(b + 16 * k, v.v[k]));                                       \
        memcpy(y, b, (size_t)n * sizeof(float));                                          \
    }                                                                                     \
    __attribute__((target("arch=x86-64-v4"))) static void name##_run(float *y, const float *x, int64_t n, \
                                                                     bool stream)         \
    {                                                                                     \
        vm_f v;                                                                           \
        int64_t i = 0;                                                                    \
        if (stream) {                                                                     \
            i = od_cpu_floats_before_line(y, n);                                          \
            if (i > 0)                                                                    \
                name##_part(y, x, i);                                                     \
            for (; i + VM_BLOCK <= n; i += VM_BLOCK) {                                    \
                EACH(v.v[k] = _mm512_loadu_ps(x + i + 16 * k));                           \
                v = F(v);                                                                 \
                EACH(_mm512_stream_ps(y + i + 16 * k, v.v[k]));                           \
            }                                                                             \
            _mm_sfence();                                                                 \
        }                                                                                 \
        for (; i + VM_BLOCK <= n; i += VM_BLOCK) {                                        \
            EACH(v.v[k] = _mm512_loadu_ps(x + i + 16 * k));                               \
            v = F(v);                                                                     \
            EACH(_mm512_storeu_ps(y + i + 16 * k, v.v[k]));                               \
        }                                                                                 \
        if (i < n)                                                                        \
            name##_part(y + i, x + i, n - i);                                             \
    }
VM_LOOP_(vm_exp, vm_exp)
VM_LOOP_(vm_sigmoid, vm_sigmoid)
VM_LOOP_(vm_silu, vm_silu)
VM_LOOP_(vm_tanh, vm_tanh)
VM_LOOP_(vm_gelu_erf, vm_gelu_erf)
VM_LOOP_(vm_gelu_tanh, vm_gelu_tanh)

static atomic_bool g_off; /* od_cpu_vm512_enable(false) */

static bool vm_ok(void)
{
    __builtin_cpu_init(); /* returns at once after the first call */
    return __builtin_cpu_supports("x86-64-v4") && !atomic_load_explicit(&g_off, memory_order_relaxed);
}
#define VM_ENTRY_(fn)                                                       \
    bool od_cpu_vm512_##fn(float *y, const float *x, int64_t n, bool stream) \
    {                                                                       \
        if (!vm_ok())                                                       \
            return false;                                                   \
        vm_##fn##_run(y, x, n, stream);                                     \
        return true;                                                        \
    }
#else
#define VM_ENTRY_(fn)                                                       \
    bool od_cpu_vm512_##fn(float *y, const float *x, int64_t n, bool stream) \
    {                                                                       \
        (void)y, (void)x, (void)n, (void)stream;                            \
        return false;                                                       \
    }
#endif

VM_ENTRY_(exp)
VM_ENTRY_(sigmoid)
VM_ENTRY_(silu)
VM_ENTRY_(tanh)
VM_ENTRY_(gelu_erf)
VM_ENTRY_(gelu_tanh)

bool od_cpu_vm512_enable(bool on)
{
#if OD_CPU_V4_CLONES
    atomic_store(&g_off, !on);
    return vm_ok();
#else
    (void)on;
    return false;
#endif
}
