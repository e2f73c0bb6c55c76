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
 *  - But for gelu (erf form) where |x| < 3.75: a table of polynomials
 *    (gelu_erf_poly), more accurate than ew_gelu_erf_f32 (2.4 ulp against
 *    5.4) and 40 % cheaper, but a table lookup that gcc's loops cannot
 *    vectorise (1.8 ns per element on AVX2, 3x theirs). So there gelu's
 *    float32 bits depend on the CPU, as oneDNN's do in torch; on one CPU
 *    they still do not depend on the lane, the block or the tail.
 *  - An element's value depends on its own x only, never on its
 *    neighbours in a block (tanh's and gelu's blocks choose a form per
 *    lane whenever their lanes disagree).
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
 * (0.078 where a block's |x| all lie below 1), gelu 0.263 -> 0.209 (0.13
 * on its polynomial), gelu tanh 0.280 -> 0.162 (run in two stages, see
 * vm_gelu_tanh_1).
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

/* For |x| >= 3.75 (and NaN): elementwise.c's ew_gelu_erf_f32, x Phi(x), with
 * Phi(-t) = e^(-t^2/2) R(t); see there for the method. Its
 * ((x nu y / d) 2^(n+64)) 2^-64 is one scaling by 2^n here: the first
 * product is exact (normal), so both round once. */
VM_FN vm_f gelu_erf_tail(vm_f x)
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
/* Phi on |x| < 3.75: a degree-7 polynomial in u = x - j/2 for each of the
 * 15 intervals of width 1/2 around j/2 (j = -7..7, column j mod 16; column
 * 8 unused), from tools/fit_gelu_phi.py. x Phi(x) so is within 2.4 ulp of
 * double x Phi(x) over every float there (1.5 but for 227 floats, all
 * below -3), where the exp and rational form above reach 5.4. */
static const float g_phi[8][16] = {
    {0.5, 0.691462457, 0.841344774, 0.93319279, 0.977249861, 0.993790329, 0.998650074, 0.999767363, 0, 0.000232629085, 0.00134989806, 0.00620966544, 0.0227501318, 0.066807203, 0.158655256, 0.308537543},
    {0.398942292, 0.352065325, 0.241970748, 0.1295176, 0.0539909638, 0.0175283011, 0.00443184795, 0.000872682664, 0, 0.000872682722, 0.00443184841, 0.0175283011, 0.0539909676, 0.1295176, 0.241970733, 0.352065325},
    {1.24013896e-10, -0.0880157948, -0.120988898, -0.0971370339, -0.05399004, -0.0219095852, -0.00664419448, -0.00152619032, 0, 0.00152719347, 0.0066477675, 0.0219103582, 0.0539909936, 0.0971379727, 0.120985083, 0.0880157873},
    {-0.0664914548, -0.0440078527, -2.73951537e-06, 0.0269825049, 0.0269957669, 0.0153372129, 0.00590918353, 0.00163628312, 0, 0.00163627719, 0.00590913044, 0.0153371887, 0.0269954056, 0.026982192, -9.84670237e-07, -0.0440082625},
    {-6.34992148e-09, 0.0201522596, 0.0202768836, 0.00603451161, -0.00452852808, -0.00595940696, -0.00343841687, -0.00120935717, 0, 0.00117728219, 0.00332417875, 0.00593471387, 0.00449802121, -0.00606427994, -0.0201548636, -0.0201518908},
    {0.0100025106, 0.0045733205, -0.00394816184, -0.00586123578, -0.00225799507, 0.000667611137, 0.00110639725, 0.000578535197, 0, 0.000578704174, 0.00110800832, 0.000668725057, -0.00224802038, -0.00584689528, -0.00400217855, 0.0045920508},
    {7.25435214e-08, -0.0028778431, -0.00303565827, 0.00097807392, 0.00160797697, 0.000747203187, 0.000938959245, 0.000113907787, 0, 0.000179113806, 0.000104626997, -0.000521757058, -0.00132919895, -0.000707579136, 0.00192067865, 0.00287371012},
    {-0.0014168144, -0.000221979572, 3.59831529e-06, 0.000502220355, -4.24758691e-05, -0.000270080956, -7.10700988e-05, 2.15276214e-05, 0, 2.00905706e-05, -8.53581587e-05, -0.00028200954, -0.000125575491, 0.000349044829, 0.000486358593, -0.000421694102},
};
/* 2x rounded to an integer j in k's low bits, the vpermps index (j mod 16),
 * u exact but for one rounding; fma(x, Phi, 0): +0.0 for -0.0, as there. */
VM_FN vm_f gelu_erf_poly(vm_f x)
{
    const vm_f magic = splat(OD_MATH_EXP_MAGIC);
    vm_f kk = vfma(x, splat(2.0f), magic), u = vfma(vsub(kk, magic), splat(-0.5f), x), p;
#define PHI_(i) _mm512_permutexvar_ps(j, _mm512_loadu_ps(g_phi[i]))
#define STEP_(i) p.v[k] = _mm512_fmadd_ps(p.v[k], u.v[k], PHI_(i))
    EACH(__m512i j = _mm512_castps_si512(kk.v[k]); p.v[k] = PHI_(7);
         STEP_(6); STEP_(5); STEP_(4); STEP_(3); STEP_(2); STEP_(1); STEP_(0));
#undef STEP_
#undef PHI_
    return vfma(x, p, splat(0.0f));
}
/* gelu (erf form): the polynomial where |x| < 3.75, the tail form
 * elsewhere, lane by lane, so a value does not depend on its neighbours;
 * a block of 64 computes only the form it needs when all lanes need the
 * same one (N(0, 1) activations: 99 % of blocks lie within 3.75). */
VM_FN vm_f vm_gelu_erf(vm_f x)
{
    vm_f r;
    __mmask16 m[VM_K], all = 0xffff, any = 0;
    EACH(m[k] = _mm512_cmp_ps_mask(_mm512_abs_ps(x.v[k]), _mm512_set1_ps(3.75f), _CMP_LT_OQ); all &= m[k];
         any |= m[k]);
    if (all == 0xffff)
        return gelu_erf_poly(x);
    if (any == 0)
        return gelu_erf_tail(x);
    vm_f poly = gelu_erf_poly(x), tail = gelu_erf_tail(x);
    EACH(r.v[k] = _mm512_mask_blend_ps(m[k], tail.v[k], poly.v[k]));
    return r;
}
/* od_math_gelu_tanh_f32: x sigmoid(2u), the exp cut to -2|u| <= 0 as
 * there; its (y 2^(n+64)) 2^-64 is one scaling by 2^n (y 2^(n+64) is exact).
 * Two stages, so that the loop runs the first of one block beside the
 * second of the block before it: the chain from x to y is too long for the
 * core to overlap blocks on its own (0.219 -> 0.162 ns per element). */
typedef struct {
    vm_f a, n, r;
} vm_gelu_tanh_s;
VM_FN vm_gelu_tanh_s vm_gelu_tanh_1(vm_f a)
{
    vm_gelu_tanh_s s = {.a = a};
    vm_f u = vmul(splat(OD_MATH_GELU_K0), vfma(vmul(vmul(splat(OD_MATH_GELU_K1), a), a), a, a));
    vm_f v;
    EACH(v.v[k] = _mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_abs_ps(u.v[k])));
    v = vmax(v, splat(-104.0f)); /* NaN: -104, as v > -104 ? v : -104 */
    const vm_f magic = splat(OD_MATH_EXP_MAGIC);
    s.n = vsub(vfma(v, splat(OD_MATH_LOG2E_F), magic), magic);
    vm_f r = vfma(s.n, splat(-OD_MATH_LN2_HI_F), v);
    s.r = vfma(s.n, splat(-OD_MATH_LN2_LO_F), r);
    return s;
}
VM_FN vm_f vm_gelu_tanh_2(vm_gelu_tanh_s s)
{
    vm_f r = s.r;
    vm_f p = vfma(splat(OD_MATH_EXP_P5), r, splat(OD_MATH_EXP_P4));
    p = vfma(p, r, splat(OD_MATH_EXP_P3));
    p = vfma(p, r, splat(OD_MATH_EXP_P2));
    p = vfma(p, r, splat(OD_MATH_EXP_P1));
    p = vfma(p, r, splat(OD_MATH_EXP_P0));
    vm_f t = vscalef(vadd(vfma(p, vmul(r, r), r), splat(1.0f)), s.n), num;
    /* u >= 0 exactly where a >= 0 (-0.0 included): u = K0 a (1 + K1 a^2) */
    EACH(__mmask16 pos = _mm512_cmp_ps_mask(s.a.v[k], _mm512_setzero_ps(), _CMP_GE_OQ);
         num.v[k] = _mm512_mask_blend_ps(pos, t.v[k], _mm512_set1_ps(1.0f)));
    return vmul(s.a, vdiv(num, vadd(splat(1.0f), t)));
}

VM_FN vm_f vm_gelu_tanh(vm_f a) { return vm_gelu_tanh_2(vm_gelu_tanh_1(a)); }

/* y[0..n) = F(x[0..n)) in blocks of VM_BLOCK (BLOCKS: one at a time, or
 * F's two stages F_1 of the next block beside F_2 of this one); n <
 * VM_BLOCK through a zero-padded block (a stream's head before y's first
 * line, the tail). stream: the whole blocks from y's first 64-byte line on
 * are stored around the cache, and fenced before returning (as softmax.c's
 * rows). Every block is loaded before the one ahead of it is stored, so
 * y == x reads each x before it is written. Two stages only where they
 * pay: they made exp 0.089 -> 0.100 and gelu 0.216 -> 0.227. */
#define VM_BLOCKS1_(F, STORE)                                        \
    for (; i + VM_BLOCK <= n; i += VM_BLOCK) {                       \
        EACH(v.v[k] = _mm512_loadu_ps(x + i + 16 * k));              \
        v = F(v);                                                    \
        EACH(STORE(y + i + 16 * k, v.v[k]));                         \
    }
#define VM_BLOCKS2_(F, STORE)                                            \
    if (i + VM_BLOCK <= n) {                                             \
        EACH(v.v[k] = _mm512_loadu_ps(x + i + 16 * k));                  \
        F##_s s = F##_1(v);                                              \
        for (; i + 2 * VM_BLOCK <= n; i += VM_BLOCK) {                   \
            EACH(v.v[k] = _mm512_loadu_ps(x + i + VM_BLOCK + 16 * k));   \
            F##_s next = F##_1(v);                                       \
            v = F##_2(s);                                                \
            EACH(STORE(y + i + 16 * k, v.v[k]));                         \
            s = next;                                                    \
        }                                                                \
        v = F##_2(s);                                                    \
        EACH(STORE(y + i + 16 * k, v.v[k]));                             \
        i += VM_BLOCK;                                                   \
    }
#define VM_LOOP_(F, BLOCKS)                                                               \
    __attribute__((target("arch=x86-64-v4"))) static void F##_part(float *y, const float *x, int64_t n) \
    {                                                                                     \
        float b[VM_BLOCK] = {0};                                                          \
        vm_f v;                                                                           \
        memcpy(b, x, (size_t)n * sizeof(float));                                          \
        EACH(v.v[k] = _mm512_loadu_ps(b + 16 * k));                                       \
        v = F(v);                                                                         \
        EACH(_mm512_storeu_ps(b + 16 * k, v.v[k]));                                       \
        memcpy(y, b, (size_t)n * sizeof(float));                                          \
    }                                                                                     \
    __attribute__((target("arch=x86-64-v4"))) static void F##_run(float *y, const float *x, int64_t n, \
                                                                  bool stream)            \
    {                                                                                     \
        vm_f v;                                                                           \
        int64_t i = 0;                                                                    \
        if (stream) {                                                                     \
            i = od_cpu_floats_before_line(y, n);                                          \
            if (i > 0)                                                                    \
                F##_part(y, x, i);                                                        \
            BLOCKS(F, _mm512_stream_ps)                                                   \
            _mm_sfence();                                                                 \
        }                                                                                 \
        BLOCKS(F, _mm512_storeu_ps) /* no whole block left after a stream */              \
        if (i < n)                                                                        \
            F##_part(y + i, x + i, n - i);                                                \
    }
VM_LOOP_(vm_exp, VM_BLOCKS1_)
VM_LOOP_(vm_sigmoid, VM_BLOCKS1_)
VM_LOOP_(vm_silu, VM_BLOCKS1_)
VM_LOOP_(vm_tanh, VM_BLOCKS1_)
VM_LOOP_(vm_gelu_erf, VM_BLOCKS1_)
VM_LOOP_(vm_gelu_tanh, VM_BLOCKS2_)

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
