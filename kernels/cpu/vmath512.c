/* vmath512.c — exp, sigmoid, silu, tanh and both gelu forms over
 * contiguous float32, and gcd and lcm over contiguous int32, on AVX-512:
 * elementwise.c's contiguous loops of those operators call these first and
 * run their own loop when they return false. gcd's and lcm's answers are
 * exact, the same as od_math.h's for every pair; the invariants below are
 * the float functions'.
 *
 * Invariants:
 *  - Every result has the bits of the function elementwise.c's AVX-512
 *    clone applies (od_math.h's; gelu's ew_gelu_erf_f32), vector body or
 *    scalar tail: the same operations in the same order, with an FMA
 *    wherever gcc contracts one there. All 2^32 floats were compared for
 *    each function when this was written; test_cpu_elementwise compares
 *    calls with these loops on and off each run. A tensor's values
 *    therefore do not depend on which path ran.
 *  - But for gelu, either form, where |x| < 4: tables of polynomials
 *    (gelu_poly), more accurate than the loops' formulas (over every float
 *    there 2.4 ulp against 5.6 for the erf form, 2.6 against 23.6 for the
 *    tanh form) and 40 % cheaper, but table lookups that gcc's loops
 *    cannot vectorise (1.8 ns per element on AVX2, 3x theirs). So there
 *    gelu's float32 bits depend on the CPU, as oneDNN's and Sleef's do in
 *    torch; on one CPU they still do not depend on the lane, the block or
 *    the tail.
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
 * (0.078 where a block's |x| all lie below 1), gelu 0.263 -> 0.130, gelu
 * tanh 0.280 -> 0.130 (on their polynomials; 0.209 and 0.216 on the tail
 * forms).
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

/* For |x| >= 4 (and NaN): elementwise.c's ew_gelu_erf_f32, x Phi(x), with
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
/* For |x| >= 4 (and NaN): od_math_gelu_tanh_f32, x sigmoid(2u), the exp
 * cut to -2|u| <= 0 as there; its (y 2^(n+64)) 2^-64 is one scaling by 2^n
 * (y 2^(n+64) is exact). */
VM_FN vm_f gelu_tanh_tail(vm_f a)
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
/* gelu(x) = x F(x), F = Phi (erf form) or sigmoid(2u) (tanh form), on
 * |x| < 4: F a degree-7 polynomial in u = x - j/2 on each of the 16
 * intervals [j/2, j/2 + 1/2) (j = -8..7, column j mod 16), from
 * tools/fit_gelu.py. From the left end, so that where F is steep (x < -2)
 * every term adds to the smallest one. Over every float there x F(x) is
 * within 2.4 ulp of double for the erf form and 2.6 for the tanh form (2
 * but for 211 and 541 floats, all below -2); the tail forms reach 5.6 and
 * 23.6 there. */
static const float g_gelu_erf_f[8][16] = {
    {0.5, 0.691462457, 0.841344774, 0.93319279, 0.977249861, 0.993790329, 0.998650074, 0.999767363, 3.16712431e-05, 0.000232629085, 0.00134989806, 0.00620966544, 0.0227501318, 0.066807203, 0.158655256, 0.308537543},
    {0.398942292, 0.352065653, 0.241968647, 0.12951827, 0.0539915077, 0.0175287593, 0.0044339234, 0.000873264973, 0.000133830123, 0.000872681907, 0.00443184562, 0.0175282899, 0.0539909825, 0.129517451, 0.241970554, 0.352064997},
    {-4.39195531e-07, -0.0880237371, -0.120940201, -0.0971526206, -0.0540026166, -0.021920288, -0.00669247657, -0.00153973431, 0.000267662777, 0.00152722304, 0.00664786203, 0.0219106283, 0.0539905094, 0.0971415639, 0.120989375, 0.0880239233},
    {-0.0664841756, -0.0439338796, -0.000432594941, 0.0271185711, 0.0271060057, 0.0154319042, 0.00633435231, 0.00175549288, 0.000334555778, 0.00163584726, 0.00590788666, 0.0153347151, 0.0270013064, 0.0269491989, -4.1769872e-05, -0.0440849997},
    {-4.30008404e-05, 0.019783685, 0.0222899206, 0.00541884452, -0.00503642811, -0.00639905781, -0.00540189724, -0.00175936276, 0.000290016382, 0.00118056114, 0.00333288987, 0.00594678894, 0.0044602924, -0.0059029921, -0.0199385714, -0.0197688639},
    {0.0101340208, 0.0056910133, -0.00962213613, -0.00421002973, -0.000858234067, 0.00189484528, 0.00655145384, 0.00210184115, 0.000181990312, 0.000564533635, 0.00107156136, 0.000633360352, -0.00210341881, -0.00630255742, -0.0047021769, 0.00343753234},
    {-0.000319005543, -0.00479016686, 0.00545355678, -0.00142256857, -0.000458823051, -0.00115365768, -0.00738648186, -0.00221227319, 8.09176709e-05, 0.00021255028, 0.000193461281, -0.000469432416, -0.00165686978, -0.000138584204, 0.0030851902, 0.00483325077},
    {-0.000904831046, 0.000979708508, -0.00317641557, 0.00145803392, 0.000753870991, 0.000669600733, 0.00383507134, 0.00111040834, 2.94461388e-05, -1.36338131e-05, -0.00018196684, -0.000295283622, 0.00020988789, 0.000427733001, -2.80730201e-05, -0.00163660618},
};
static const float g_gelu_tanh_f[8][16] = {
    {0.5, 0.691428006, 0.841192007, 0.933047712, 0.977298856, 0.993966281, 0.998787522, 0.999823928, 1.75614878e-05, 0.000176056477, 0.00121246406, 0.00603370648, 0.0227011535, 0.0669522807, 0.158808008, 0.308571994},
    {0.398942292, 0.351884842, 0.241770849, 0.129775837, 0.0543995537, 0.0175950155, 0.00426655728, 0.00074364664, 8.81710803e-05, 0.000742485165, 0.00426553981, 0.0175941102, 0.0544001572, 0.129775494, 0.24177222, 0.351882666},
    {-4.42570752e-07, -0.0882844552, -0.120670825, -0.0966993496, -0.0541548058, -0.0223061852, -0.00673830556, -0.00145849178, 0.000206303434, 0.00143351359, 0.00671656523, 0.022286782, 0.0541699454, 0.096687004, 0.120695196, 0.0882855654},
    {-0.0668131858, -0.043652039, 0.000150121254, 0.0268149842, 0.026472548, 0.0156401787, 0.00631796895, 0.00189357309, 0.000296115177, 0.00165548571, 0.00610869564, 0.015454296, 0.0265965834, 0.0267517678, 0.000437404495, -0.0441319942},
    {-4.38313e-05, 0.0193407722, 0.0212972313, 0.00530448696, -0.00364295719, -0.00665162923, -0.00441587344, -0.00240733242, 0.000288432231, 0.00124940707, 0.00340805855, 0.00574699929, 0.00434518047, -0.00588853657, -0.0201279223, -0.0192534402},
    {0.0103658112, 0.00773542421, -0.00769028114, -0.00462800777, -0.00382752297, 0.00293028611, 0.00372196757, 0.00365129788, 0.000195272252, 0.000599991123, 0.0010220611, 0.00054089335, -0.00218909653, -0.00527150976, -0.00403475529, 0.00111070869},
    {-0.000327547605, -0.0077476115, 0.00260754465, -0.00053496391, 0.0035785744, -0.00271609239, -0.00363572245, -0.00422788132, 9.51178808e-05, 0.000206518089, 0.000132896472, -0.000467242236, -0.00120807672, -0.00150489912, 0.00177270931, 0.00810743123},
    {-0.000952521805, 0.00252285833, -0.0015708073, 0.000977289979, -0.00144985202, 0.00151883299, 0.001851195, 0.00217989972, 2.60737834e-05, -2.73469868e-05, -0.000163247925, -0.000240750989, -3.8124901e-05, 0.0010933741, 0.000738698698, -0.00336244935},
};
/* j = floor(2x) (2x - 1/2 rounded to an integer: either neighbour at a
 * tie, which u tolerates) in k's low bits, the vpermps index (j mod 16); u
 * exact but for one rounding. The erf form's fma(x, F, 0) gives +0.0 for
 * -0.0, as ew_gelu_erf_f32 does; the tanh form's x F keeps -0.0, as
 * od_math_gelu_tanh_f32 does. */
VM_FN vm_f gelu_poly(vm_f x, const float (*f)[16], bool plus_zero)
{
    const vm_f magic = splat(OD_MATH_EXP_MAGIC);
    vm_f kk = vadd(vfma(x, splat(2.0f), splat(-0.5f)), magic), u = vfma(vsub(kk, magic), splat(-0.5f), x), p;
#define F_(i) _mm512_permutexvar_ps(j, _mm512_loadu_ps(f[i]))
#define STEP_(i) p.v[k] = _mm512_fmadd_ps(p.v[k], u.v[k], F_(i))
    EACH(__m512i j = _mm512_castps_si512(kk.v[k]); p.v[k] = F_(7);
         STEP_(6); STEP_(5); STEP_(4); STEP_(3); STEP_(2); STEP_(1); STEP_(0));
#undef STEP_
#undef F_
    return plus_zero ? vfma(x, p, splat(0.0f)) : vmul(x, p);
}
/* gelu in either form: the polynomial where |x| < 4, the tail form
 * elsewhere, lane by lane, so a value does not depend on its neighbours;
 * a block of 64 computes only the form it needs when all lanes need the
 * same one (N(0, 1) activations: 99.6 % of blocks lie within 4). */
#define VM_GELU_(name, f, plus_zero, tail)                                                      \
    VM_FN vm_f name(vm_f x)                                                                     \
    {                                                                                           \
        vm_f r;                                                                                 \
        __mmask16 m[VM_K], all = 0xffff, any = 0;                                               \
        EACH(m[k] = _mm512_cmp_ps_mask(_mm512_abs_ps(x.v[k]), _mm512_set1_ps(4.0f), _CMP_LT_OQ);  \
             all &= m[k]; any |= m[k]);                                                         \
        if (all == 0xffff)                                                                      \
            return gelu_poly(x, f, plus_zero);                                                  \
        if (any == 0)                                                                           \
            return tail(x);                                                                     \
        vm_f poly = gelu_poly(x, f, plus_zero), t = tail(x);                                    \
        EACH(r.v[k] = _mm512_mask_blend_ps(m[k], t.v[k], poly.v[k]));                          \
        return r;                                                                               \
    }
VM_GELU_(vm_gelu_erf, g_gelu_erf_f, true, gelu_erf_tail)
VM_GELU_(vm_gelu_tanh, g_gelu_tanh_f, false, gelu_tanh_tail)

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

/* gcd of int32 by Stein's binary method, VM_K vectors of 16 lanes stepping
 * together until every lane is done: shifts, min, max and a subtraction per
 * step where ATen's Euclid divides per step (bench_ew gcd, 1.6e7 int32 in
 * [1, 100): 217 -> 13.7 ms, 4 -> 60 % of memcpy).
 * A lane whose |a| or |b| stays negative (INT32_MIN, where Euclid's steps
 * go negative and ATen's answers with them) sends its whole block to
 * od_math.h's scalar form, as does the tail. A lane with a 0 computes
 * gcd(1, 1) and takes a | b: gcd(0, b) = |b|. lcm: ATen's |a / g * b| in
 * int32 (od_math_lcm_bits_i64), a / g exact in double, 0 where g is. Every
 * block is loaded before it is stored, so y may be a or b. */
__attribute__((target("arch=x86-64-v4"))) static void vm_gcd_i32_run(int32_t *y, const int32_t *a, const int32_t *b,
                                                                     int64_t n, bool lcm)
{
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1), c31 = _mm512_set1_epi32(31);
    /* trailing zeros of each lane; 2^32 - 1 for a 0, which srlv turns into 0 */
#define VM_CTZ32_(v) _mm512_sub_epi32(c31, _mm512_lzcnt_epi32(_mm512_and_si512(v, _mm512_sub_epi32(zero, v))))
    int64_t i = 0;
    for (; i + VM_BLOCK <= n; i += VM_BLOCK) {
        __m512i av[VM_K], bv[VM_K], u[VM_K], w[VM_K], or0[VM_K], sh[VM_K];
        __mmask16 z[VM_K], live[VM_K], neg = 0, any;
        EACH(av[k] = _mm512_loadu_si512(a + i + 16 * k);
             bv[k] = _mm512_loadu_si512(b + i + 16 * k);
             u[k] = _mm512_abs_epi32(av[k]);
             w[k] = _mm512_abs_epi32(bv[k]);
             or0[k] = _mm512_or_si512(u[k], w[k]);
             neg |= _mm512_movepi32_mask(or0[k]));
        if (neg) {
            for (int64_t j = i; j < i + VM_BLOCK; j++)
                y[j] = (int32_t)(lcm ? od_math_lcm_bits_i64(a[j], b[j], 32) : od_math_gcd_bits_i64(a[j], b[j], 32));
            continue;
        }
        EACH(z[k] = _mm512_cmpeq_epi32_mask(u[k], zero) | _mm512_cmpeq_epi32_mask(w[k], zero);
             u[k] = _mm512_mask_mov_epi32(u[k], z[k], one);
             w[k] = _mm512_mask_mov_epi32(w[k], z[k], one);
             sh[k] = VM_CTZ32_(_mm512_or_si512(u[k], w[k])); /* the common power of two */
             u[k] = _mm512_srlv_epi32(u[k], VM_CTZ32_(u[k]));
             live[k] = 0xffff);
        do { /* u odd; w = |u - w| with its twos removed, u = the smaller, until w is 0 */
            any = 0;
            EACH(w[k] = _mm512_srlv_epi32(w[k], VM_CTZ32_(w[k]));
                 __m512i lo = _mm512_min_epu32(u[k], w[k]);
                 __m512i hi = _mm512_max_epu32(u[k], w[k]);
                 u[k] = _mm512_mask_mov_epi32(u[k], live[k], lo);
                 __m512i d = _mm512_sub_epi32(hi, lo);
                 live[k] = _mm512_mask_test_epi32_mask(live[k], d, d);
                 w[k] = _mm512_maskz_mov_epi32(live[k], d);
                 any |= live[k]);
        } while (any);
        EACH(u[k] = _mm512_mask_mov_epi32(_mm512_sllv_epi32(u[k], sh[k]), z[k], or0[k]));
        if (lcm)
            EACH(__m512d g0 = _mm512_cvtepi32_pd(_mm512_castsi512_si256(u[k]));
                 __m512d g1 = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(u[k], 1));
                 __m256i q0 = _mm512_cvttpd_epi32(_mm512_div_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(av[k])), g0));
                 __m256i q1 = _mm512_cvttpd_epi32(_mm512_div_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(av[k], 1)), g1));
                 __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
                 u[k] = _mm512_maskz_abs_epi32(_mm512_test_epi32_mask(u[k], u[k]), _mm512_mullo_epi32(q, bv[k])));
        EACH(_mm512_storeu_si512(y + i + 16 * k, u[k]));
    }
#undef VM_CTZ32_
    for (; i < n; i++)
        y[i] = (int32_t)(lcm ? od_math_lcm_bits_i64(a[i], b[i], 32) : od_math_gcd_bits_i64(a[i], b[i], 32));
}

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

#if OD_CPU_V4_CLONES
#define VM_ENTRY_I32_(fn, lcm)                                                              \
    bool od_cpu_vm512_##fn##_i32(int32_t *y, const int32_t *a, const int32_t *b, int64_t n) \
    {                                                                                       \
        if (!vm_ok())                                                                       \
            return false;                                                                   \
        vm_gcd_i32_run(y, a, b, n, lcm);                                                    \
        return true;                                                                        \
    }
#else
#define VM_ENTRY_I32_(fn, lcm)                                                              \
    bool od_cpu_vm512_##fn##_i32(int32_t *y, const int32_t *a, const int32_t *b, int64_t n) \
    {                                                                                       \
        (void)y, (void)a, (void)b, (void)n;                                                 \
        return false;                                                                       \
    }
#endif
VM_ENTRY_I32_(gcd, false)
VM_ENTRY_I32_(lcm, true)

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
