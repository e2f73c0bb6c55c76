/* elementwise.c — CPU kernels of the elementwise operators: binary
 * arithmetic, comparisons, where, unary math, clamp, and lerp, addcmul,
 * addcdiv and nextafter.
 *
 * Invariants:
 *  - The shape function of the operator (kernels/shape_elementwise.c) runs
 *    first and is the only judge of shapes, dtypes and argument errors; the
 *    kernel then converts every input to the compute dtype (torch's common
 *    dtype: a converted contiguous copy when a tensor's dtype differs, the
 *    value itself for a Scalar), allocates the output and runs one typed
 *    inner loop per dtype through the strided iterator (iter.h).
 *  - All per-element math comes from kernels/od_math.h, shared with CUDA.
 *  - Inner loops are pure: integer division by zero is recorded in the loop
 *    context (never computed) and reported as "ZeroDivisionError" after the
 *    run, with the output released.
 *  - Contiguous runs (and runs with one broadcast scalar operand) take plain
 *    restrict-qualified loops that gcc vectorises; float32/float64 ones are
 *    also cloned for AVX2 (x86-64-v3) and AVX-512 (x86-64-v4) with a
 *    run-time choice (ifunc), because the transcendental ops are
 *    compute-bound at SSE width (sigmoid: 0.54 -> 0.36 ns/element from v3
 *    to v4 in cache on the build machine).
 */
/* Must precede every include: the inline math of the headers has to be
 * compiled with the same options as the loops it is inlined into. The
 * dynamic cost model vectorises loops of unknown trip count at -O2; trapping
 * math off lets gcc if-convert the NaN-aware selects (we never read the FP
 * exception flags); fp-contract lets the AVX2 and AVX-512 clones use FMA (~20% on the
 * exp polynomial; results stay within the ops' error bounds, as on CUDA,
 * which contracts by default); unswitching copies a loop for each value of
 * a condition the loop does not change (clamp's NaN bounds), so that the
 * copy for the usual value vectorises. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math", "fp-contract=fast", "unswitch-loops")
#endif

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_math.h"
#include "od_shape.h"

/* Which dtypes' fast loops get the wide clones. */
#define VEC_BOOL
#define VEC_UINT8
#define VEC_INT8
#define VEC_INT16
#define VEC_INT32 OD_CPU_CLONES
#define VEC_INT64 OD_CPU_CLONES
#define VEC_FLOAT16
#define VEC_BFLOAT16
#define VEC_FLOAT32 OD_CPU_CLONES
#define VEC_FLOAT64 OD_CPU_CLONES

#define CAT OD_CPU_CAT
/* Elements per step of ATen's AVX2 vectorized_loop (two Vectorized): the
 * first n - n % VEC2 of a contiguous loop take the vectorized path. */
#define VEC2_BOOL 64
#define VEC2_UINT8 64
#define VEC2_INT8 64
#define VEC2_INT16 32
#define VEC2_INT32 16
#define VEC2_INT64 8
#define VEC2_FLOAT16 32
#define VEC2_BFLOAT16 32
#define VEC2_FLOAT32 16
#define VEC2_FLOAT64 8
/* MFP(fn, DT): od_math's fn, or its _vec_ form on the vectorized path when
 * od_math.h defines OD_MATH_VEC_<fn> (as "~, 1": the probe counts it). */
#define EW_PROBE_N(x, n, ...) n
#define EW_PROBE(...) EW_PROBE_N(__VA_ARGS__, 0, )
#define EW_HAS_VEC(fn) EW_PROBE(CAT(OD_MATH_VEC_, fn))
#define MFP_0(fn, DT) MF(fn, DT)
#define MFP_1(fn, DT) (vp ? CAT(od_math_##fn##_vec_, OD_CPU_FAM_##DT) : MF(fn, DT))
#define MFP(fn, DT) CAT(MFP_, EW_HAS_VEC(fn))(fn, DT)
#define CT(DT) CAT(OD_CPU_CT_, OD_CPU_FAM_##DT)
#define MF(op, DT) CAT(od_math_##op##_, OD_CPU_FAM_##DT)
#define CF(field, DT) CAT(field##_, OD_CPU_FAM_##DT)

/* Per-call constants of an inner loop. */
typedef struct ew_ctx {
    int64_t alpha_i64;
    float alpha_f32;
    double alpha_f64;
    atomic_int zero_div; /* an integer division by zero was seen */
    int pow_kind;        /* pow.Tensor_Scalar on floats: POW_* */
    double pow_exp;      /* ... its exponent, as ATen holds it for the dtype */
    bool scalar_path;    /* ATen's loop would be strided: no vectorized path */
    bool stream;         /* the output is OD_CPU_STREAM_BYTES or more: DEF_VM512's loops stream it */
    /* an OD_EWP operator's parameters in each family (od_ew_params_of) */
    float p_f32[OD_EW_MAX_PARAMS];
    double p_f64[OD_EW_MAX_PARAMS];
    int64_t p_i64[OD_EW_MAX_PARAMS];
} ew_ctx;

/* ATen's pow_tensor_scalar_kernel: exponents 0.5, -0.5 and -1 are sqrt,
 * rsqrt and reciprocal (so pow(-0.0, 0.5) is -0.0) except on float16. On
 * float32 and float64 (pow_tensor_scalar_optimized_kernel) 2, 3 and -2 are
 * x * x, x * x * x and 1 / (x * x), rounded at each step; any other
 * exponent is Sleef's pow on the vectorized path, with the exponent as the
 * dtype (so an odd float32 exponent above 2^24 turns even there), and
 * std::pow(base, (double)exp) on the scalar tail. float16 and bfloat16 take
 * std::pow for the rest. */
enum { POW_GENERAL, POW_SQRT, POW_RSQRT, POW_RECIP, POW_SQUARE, POW_CUBE, POW_RSQUARE, NUM_POW };

static void note_zero_div(ew_ctx *c, int zf)
{
    if (zf)
        atomic_store_explicit(&c->zero_div, 1, memory_order_relaxed);
}

/* Integer division checks b first (the flag makes the kernel fail); the
 * floating versions follow IEEE and ignore the flag. */
static inline int64_t ew_divt_i64(int64_t a, int64_t b, int *zf)
{
    if (b == 0) {
        *zf = 1;
        return 0;
    }
    return od_math_div_trunc_i64(a, b);
}
static inline int64_t ew_divf_i64(int64_t a, int64_t b, int *zf)
{
    if (b == 0) {
        *zf = 1;
        return 0;
    }
    return od_math_div_floor_i64(a, b);
}
static inline float ew_divt_f32(float a, float b, int *zf) { (void)zf; return od_math_div_trunc_f32(a, b); }
static inline float ew_divf_f32(float a, float b, int *zf) { (void)zf; return od_math_div_floor_f32(a, b); }
static inline float ew_divfv_f32(float a, float b, int *zf) { (void)zf; return od_math_div_floor_vec_f32(a, b); }
static inline double ew_divfv_f64(double a, double b, int *zf) { (void)zf; return od_math_div_floor_vec_f64(a, b); }
#define ew_divfv_i64 ew_divf_i64
static inline double ew_divt_f64(double a, double b, int *zf) { (void)zf; return od_math_div_trunc_f64(a, b); }
static inline double ew_divf_f64(double a, double b, int *zf) { (void)zf; return od_math_div_floor_f64(a, b); }
/* float16 and bfloat16 (float32 and float64 have a loop per kind: g_pows) */
static inline float ew_pows_f32(float a, const ew_ctx *c)
{
    switch (c->pow_kind) {
    case POW_SQRT: return sqrtf(a);
    case POW_RSQRT: return 1.0f / sqrtf(a);
    case POW_RECIP: return 1.0f / a;
    default: return (float)pow((double)a, c->pow_exp);
    }
}

#define ST_SAME(x) (x)

/* ---- loop generators ----------------------------------------------------------- */

/* ATen's contiguous loop: its Vectorized kernel on the first nv elements,
 * the scalar function on the rest. Two loops, so that vp is a constant in
 * each and gcc vectorises the first, calling Sleef's vector functions where
 * od_math.h maps an operator's _vec_ form to them. */
#define EW_SPLIT_LOOP(nv, n, BODY)      \
    do {                                \
        int64_t i = 0;                  \
        for (; i < (nv); i++) {         \
            const bool vp = true;       \
            (void)vp;                   \
            BODY                        \
        }                               \
        for (; i < (n); i++) {          \
            const bool vp = false;      \
            (void)vp;                   \
            BODY                        \
        }                               \
    } while (0)

/* Two inputs of dtype DT, output of type OT stored with SF(expr). EXPR reads
 * a and b (compute type), c (ew_ctx *) and may set zf. Variants: all
 * contiguous (cc), b broadcast (cs), a broadcast (sc), general strides. */
#define DEF_LOOP2(NAME, DT, OT, SF, EXPR)                                                         \
    static VEC_##DT void NAME##_cc(char *po, const char *px, const char *py, int64_t n, ew_ctx *c) \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        OT *restrict o = (OT *)po;                                                                \
        const T *restrict x = (const T *)px;                                                      \
        const T *restrict y = (const T *)py;                                                      \
        int zf = 0;                                                                               \
        const int64_t nv = c->scalar_path ? 0 : n - n % VEC2_##DT;                                \
        EW_SPLIT_LOOP(nv, n, CT(DT) a = OD_CPU_LD_##DT(x[i]); CT(DT) b = OD_CPU_LD_##DT(y[i]);    \
                      o[i] = SF(EXPR););                                                          \
        note_zero_div(c, zf);                                                                     \
    }                                                                                             \
    static VEC_##DT void NAME##_cs(char *po, const char *px, const char *py, int64_t n, ew_ctx *c) \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        OT *restrict o = (OT *)po;                                                                \
        const T *restrict x = (const T *)px;                                                      \
        const CT(DT) b = OD_CPU_LD_##DT(*(const T *)py);                                          \
        int zf = 0;                                                                               \
        const int64_t nv = c->scalar_path ? 0 : n - n % VEC2_##DT;                                \
        EW_SPLIT_LOOP(nv, n, CT(DT) a = OD_CPU_LD_##DT(x[i]); o[i] = SF(EXPR););                  \
        note_zero_div(c, zf);                                                                     \
    }                                                                                             \
    static VEC_##DT void NAME##_sc(char *po, const char *px, const char *py, int64_t n, ew_ctx *c) \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        OT *restrict o = (OT *)po;                                                                \
        const CT(DT) a = OD_CPU_LD_##DT(*(const T *)px);                                          \
        const T *restrict y = (const T *)py;                                                      \
        int zf = 0;                                                                               \
        const int64_t nv = c->scalar_path ? 0 : n - n % VEC2_##DT;                                \
        EW_SPLIT_LOOP(nv, n, CT(DT) b = OD_CPU_LD_##DT(y[i]); o[i] = SF(EXPR););                  \
        note_zero_div(c, zf);                                                                     \
    }                                                                                             \
    static void NAME(void *vc, char **d, const int64_t *s, int64_t n)                            \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        ew_ctx *c = vc;                                                                           \
        const int64_t eo = (int64_t)sizeof(OT), ei = (int64_t)sizeof(T);                          \
        if (s[0] == eo && s[1] == ei && s[2] == ei) {                                             \
            NAME##_cc(d[0], d[1], d[2], n, c);                                                    \
        } else if (s[0] == eo && s[1] == ei && s[2] == 0) {                                       \
            NAME##_cs(d[0], d[1], d[2], n, c);                                                    \
        } else if (s[0] == eo && s[1] == 0 && s[2] == ei) {                                       \
            NAME##_sc(d[0], d[1], d[2], n, c);                                                    \
        } else {                                                                                  \
            char *po = d[0];                                                                      \
            const char *px = d[1], *py = d[2];                                                    \
            int zf = 0;                                                                           \
            const bool vp = false; /* strided: ATen's scalar path */                              \
            (void)vp;                                                                             \
            for (int64_t i = 0; i < n; i++, po += s[0], px += s[1], py += s[2]) {                 \
                CT(DT) a = OD_CPU_LD_##DT(*(const T *)px);                                        \
                CT(DT) b = OD_CPU_LD_##DT(*(const T *)py);                                        \
                *(OT *)po = SF(EXPR);                                                             \
            }                                                                                     \
            note_zero_div(c, zf);                                                                 \
        }                                                                                         \
    }

/* One input of dtype DT, output of type OT stored with SF(expr). EXPR reads a
 * and c (ew_ctx *: an OD_EWP operator's parameters). */
/* An OD_EWP operator's parameters as locals (pl_f32/_f64/_i64): read through
 * c inside a loop, gcc cannot rule out that the output stores change them,
 * and leaves the loop scalar (threshold, leaky_relu, softplus). */
#define EW_PARAMS_LOCAL(c)                                                                        \
    float pl_f32[OD_EW_MAX_PARAMS] = {0};                                                         \
    double pl_f64[OD_EW_MAX_PARAMS] = {0};                                                        \
    int64_t pl_i64[OD_EW_MAX_PARAMS] = {0};                                                       \
    if (c) {                                                                                      \
        memcpy(pl_f32, (c)->p_f32, sizeof pl_f32);                                                \
        memcpy(pl_f64, (c)->p_f64, sizeof pl_f64);                                                \
        memcpy(pl_i64, (c)->p_i64, sizeof pl_i64);                                                \
    }                                                                                             \
    (void)pl_f32;                                                                                 \
    (void)pl_f64;                                                                                 \
    (void)pl_i64;
#define DEF_LOOP1(NAME, DT, OT, SF, EXPR)                                                         \
    static VEC_##DT void NAME##_c(char *po, const char *px, int64_t n, const ew_ctx *c)           \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        OT *restrict o = (OT *)po;                                                                \
        const T *restrict x = (const T *)px;                                                      \
        const int64_t nv = n - n % VEC2_##DT;                                                     \
        EW_PARAMS_LOCAL(c)                                                                        \
        (void)c;                                                                                  \
        EW_SPLIT_LOOP(nv, n, CT(DT) a = OD_CPU_LD_##DT(x[i]); o[i] = SF(EXPR););                  \
    }                                                                                             \
    /* cloned too, so a strided loop's od_math (gelu's tanh form) has its FMAs */                \
    static VEC_##DT void NAME(void *vc, char **d, const int64_t *s, int64_t n)                   \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        const int64_t eo = (int64_t)sizeof(OT), ei = (int64_t)sizeof(T);                          \
        const ew_ctx *c = vc;                                                                     \
        EW_PARAMS_LOCAL(c)                                                                        \
        (void)c;                                                                                  \
        if (s[0] == eo && s[1] == ei) {                                                           \
            NAME##_c(d[0], d[1], n, c);                                                           \
        } else if (s[0] == eo && s[1] == 0) {                                                     \
            /* a broadcast input: ATen's vectorized loop too (is_contiguous_scalar) */           \
            OT *o = (OT *)d[0];                                                                   \
            CT(DT) a = OD_CPU_LD_##DT(*(const T *)d[1]);                                          \
            const int64_t nv = n - n % VEC2_##DT;                                                 \
            EW_SPLIT_LOOP(nv, n, o[i] = SF(EXPR););                                               \
        } else {                                                                                  \
            char *po = d[0];                                                                      \
            const char *px = d[1];                                                                \
            const bool vp = false; /* strided: ATen's scalar path */                              \
            (void)vp;                                                                             \
            for (int64_t i = 0; i < n; i++, po += s[0], px += s[1]) {                             \
                CT(DT) a = OD_CPU_LD_##DT(*(const T *)px);                                        \
                *(OT *)po = SF(EXPR);                                                             \
            }                                                                                     \
        }                                                                                         \
    }

/* clamp: x, lo, hi of dtype DT. Fast paths: all contiguous, and x
 * contiguous with scalar bounds (the Scalar overload). */
#define DEF_CLAMP(NAME, DT)                                                                       \
    static VEC_##DT void NAME##_css(char *po, const char *px, const char *pl, const char *ph,     \
                                    int64_t n)                                                    \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        T *restrict o = (T *)po;                                                                  \
        const T *restrict x = (const T *)px;                                                      \
        const CT(DT) lo = OD_CPU_LD_##DT(*(const T *)pl);                                         \
        const CT(DT) hi = OD_CPU_LD_##DT(*(const T *)ph);                                         \
        for (int64_t i = 0; i < n; i++)                                                           \
            o[i] = OD_CPU_ST_##DT(MF(clamp, DT)(OD_CPU_LD_##DT(x[i]), lo, hi));                   \
    }                                                                                             \
    static VEC_##DT void NAME##_ccc(char *po, const char *px, const char *pl, const char *ph,     \
                                    int64_t n)                                                    \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        T *restrict o = (T *)po;                                                                  \
        const T *restrict x = (const T *)px;                                                      \
        const T *restrict l = (const T *)pl;                                                      \
        const T *restrict h = (const T *)ph;                                                      \
        for (int64_t i = 0; i < n; i++)                                                           \
            o[i] = OD_CPU_ST_##DT(MF(clamp, DT)(OD_CPU_LD_##DT(x[i]), OD_CPU_LD_##DT(l[i]),       \
                                                OD_CPU_LD_##DT(h[i])));                           \
    }                                                                                             \
    static void NAME(void *vc, char **d, const int64_t *s, int64_t n)                            \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        const int64_t e = (int64_t)sizeof(T);                                                     \
        (void)vc;                                                                                 \
        if (s[0] == e && s[1] == e && s[2] == 0 && s[3] == 0) {                                   \
            NAME##_css(d[0], d[1], d[2], d[3], n);                                                \
        } else if (s[0] == e && s[1] == e && s[2] == e && s[3] == e) {                            \
            NAME##_ccc(d[0], d[1], d[2], d[3], n);                                                \
        } else {                                                                                  \
            char *po = d[0];                                                                      \
            const char *px = d[1], *pl = d[2], *ph = d[3];                                        \
            for (int64_t i = 0; i < n; i++, po += s[0], px += s[1], pl += s[2], ph += s[3])       \
                *(T *)po = OD_CPU_ST_##DT(MF(clamp, DT)(OD_CPU_LD_##DT(*(const T *)px),           \
                                                        OD_CPU_LD_##DT(*(const T *)pl),           \
                                                        OD_CPU_LD_##DT(*(const T *)ph)));         \
        }                                                                                         \
    }

/* ---- the loops ------------------------------------------------------------------- */

#define SAME(DT) OD_CPU_T_##DT, OD_CPU_ST_##DT
/* Expands SAME(DT) into two arguments before DEF_LOOP2 counts them. */
#define DEF_LOOP2_(...) DEF_LOOP2(__VA_ARGS__)

/* a + alpha * b with the product rounded as ATen's CPU kernel rounds it
 * (float16 -60000 + 2 * 40000 is inf there); float and double are one fma
 * there (vec::fmadd), so -inf + 1e300 * 1e300 is -inf, not NaN. */
#define G_add(DT) \
    DEF_LOOP2_(add_##DT, DT, SAME(DT), MF(add, DT)(a, OD_CPU_RND_##DT(MF(mul, DT)(c->CF(alpha, DT), b)), (CT(DT))1))
#define G_add_fma(DT, FMA) DEF_LOOP2_(add_##DT, DT, SAME(DT), FMA(c->CF(alpha, DT), b, a))
#define G_mul(DT) DEF_LOOP2_(mul_##DT, DT, SAME(DT), MF(mul, DT)(a, b))
#define G_div(DT) DEF_LOOP2_(div_##DT, DT, SAME(DT), MF(div, DT)(a, b))
#define G_divt(DT) DEF_LOOP2_(divt_##DT, DT, SAME(DT), CAT(ew_divt_, OD_CPU_FAM_##DT)(a, b, &zf))
/* float16 / bfloat16: the quotient is rounded to 16 bits before trunc, as in
 * ATen (bfloat16 1.3046875 / -0.11865234375 -> -11.0 -> -11). */
#define G_divt16(DT) DEF_LOOP2_(divt_##DT, DT, SAME(DT), truncf(OD_CPU_RND_##DT(a / b)))
#define G_divf(DT) \
    DEF_LOOP2_(divf_##DT, DT, SAME(DT), (vp ? CAT(ew_divfv_, OD_CPU_FAM_##DT) : CAT(ew_divf_, OD_CPU_FAM_##DT))(a, b, &zf))
#define G_pow(DT) DEF_LOOP2_(pow_##DT, DT, SAME(DT), MF(pow, DT)(a, b))
#define G_pows(DT) DEF_LOOP2_(pows_##DT, DT, SAME(DT), ((void)b, CAT(ew_pows_, OD_CPU_FAM_##DT)(a, c)))
#define G_max(DT) DEF_LOOP2_(max_##DT, DT, SAME(DT), MF(maximum, DT)(a, b))
#define G_min(DT) DEF_LOOP2_(min_##DT, DT, SAME(DT), MF(minimum, DT)(a, b))
G_add(BOOL) G_add(UINT8) G_add(INT8) G_add(INT16) G_add(INT32) G_add(INT64)
G_add(FLOAT16) G_add(BFLOAT16) G_add_fma(FLOAT32, fmaf) G_add_fma(FLOAT64, fma)
OD_CPU_ALL_DTYPES(G_mul)
OD_CPU_FLOAT_DTYPES(G_div)
G_divt(BOOL) G_divt(UINT8) G_divt(INT8) G_divt(INT16) G_divt(INT32) G_divt(INT64)
G_divt16(FLOAT16) G_divt16(BFLOAT16) G_divt(FLOAT32) G_divt(FLOAT64)
OD_CPU_ALL_DTYPES(G_divf)
/* pow.Tensor_Tensor: Sleef's pow on float32's and float64's vectorized
 * path, as ATen's Vectorized pow (libm's powf per element was the whole
 * loop scalar) */
#define G_powv(DT, FAM) DEF_LOOP2_(pow_##DT, DT, SAME(DT), vp ? od_math_pow_vec_##FAM(a, b) : MF(pow, DT)(a, b))
G_pow(BOOL) G_pow(UINT8) G_pow(INT8) G_pow(INT16) G_pow(INT32) G_pow(INT64) G_pow(FLOAT16) G_pow(BFLOAT16)
G_powv(FLOAT32, f32) G_powv(FLOAT64, f64)
G_pows(FLOAT16) G_pows(BFLOAT16)
/* float32 and float64: one loop per exponent kind, so each vectorises (the
 * switch above, with its call, leaves a loop scalar); b is the exponent as
 * the dtype, c->pow_exp as a double */
#define G_powk(K, DT, EXPR) DEF_LOOP2_(pows_##K##_##DT, DT, SAME(DT), EXPR)
#define G_pows_fd(DT, T, FAM, SQRT)                                                                \
    G_powk(gen, DT, vp ? od_math_pow_vec_##FAM(a, b) : (T)pow((double)a, c->pow_exp))               \
    G_powk(sqrt, DT, ((void)b, SQRT(a)))                                                          \
    G_powk(rsqrt, DT, ((void)b, (T)1 / SQRT(a)))                                                  \
    G_powk(recip, DT, ((void)b, (T)1 / a))                                                        \
    G_powk(square, DT, ((void)b, a * a))                                                          \
    G_powk(cube, DT, ((void)b, a * a * a))                                                        \
    G_powk(rsquare, DT, ((void)b, vp ? (T)1 / (a * a) : (T)(1.0 / (double)(a * a))))
G_pows_fd(FLOAT32, float, f32, sqrtf)
G_pows_fd(FLOAT64, double, f64, sqrt)
OD_CPU_ALL_DTYPES(G_max)
OD_CPU_ALL_DTYPES(G_min)

#define G_cmp(op)                                                                          \
    G_cmp1_(op, BOOL) G_cmp1_(op, UINT8) G_cmp1_(op, INT8) G_cmp1_(op, INT16)              \
    G_cmp1_(op, INT32) G_cmp1_(op, INT64) G_cmp1_(op, FLOAT16) G_cmp1_(op, BFLOAT16)       \
    G_cmp1_(op, FLOAT32) G_cmp1_(op, FLOAT64)
#define G_cmp1_(op, DT) DEF_LOOP2(op##_##DT, DT, bool, ST_SAME, MF(op, DT)(a, b))
G_cmp(eq)
G_cmp(ne)
G_cmp(lt)
G_cmp(le)
G_cmp(gt)
G_cmp(ge)

#define G_u(op, DT) DEF_LOOP1(op##_##DT, DT, SAME(DT), MF(op, DT)(a))
#define DEF_LOOP1_(...) DEF_LOOP1(__VA_ARGS__)
/* The contiguous loop of an operator with a cheap side (OD_MATH_EASY_<fn>):
 * each block of EW_EASY_BLOCK elements that od_math_<fn>_is_easy accepts
 * whole takes od_math_<fn>_easy, the others the vectorized expression, as
 * ATen's kernel skips elu's exp per vector; the rest as ALL's _c loop does
 * it (the blocks end on a multiple of VEC2, so the scalar tail is the same).
 * Other strides go to ALL. */
#define EW_EASY_BLOCK 64
/* The loop function of DEF_EASY and DEF_SPLIT: their NAME_c where output and
 * input are contiguous, ALL (the generic loops) elsewhere. */
#define EW_CONTIGUOUS_OR(NAME, ALL, DT, OT)                                                       \
    static void NAME(void *vc, char **d, const int64_t *s, int64_t n)                            \
    {                                                                                             \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(OD_CPU_T_##DT))                \
            NAME##_c(d[0], d[1], n, vc);                                                          \
        else                                                                                      \
            ALL(vc, d, s, n);                                                                     \
    }
/* The block loops' common frame: NAME_c runs BODY (the rest of the
 * arguments; i is the block's first element) for each block of
 * EW_EASY_BLOCK up to NB, after LOCALS, and ALL's _c loop on what is left. */
#define DEF_BLOCKS(NAME, ALL, DT, OT, NB, LOCALS, ...)                                            \
    static VEC_##DT void NAME##_c(char *po, const char *px, int64_t n, const ew_ctx *c)           \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        OT *restrict o = (OT *)po;                                                                \
        const T *restrict x = (const T *)px;                                                      \
        EW_PARAMS_LOCAL(c)                                                                        \
        LOCALS                                                                                    \
        const int64_t nb = NB;                                                                    \
        int64_t i = 0;                                                                            \
        for (; i < nb; i += EW_EASY_BLOCK) {                                                      \
            __VA_ARGS__                                                                           \
        }                                                                                         \
        ALL##_c((char *)(o + i), (const char *)(x + i), n - i, c);                                \
    }                                                                                             \
    EW_CONTIGUOUS_OR(NAME, ALL, DT, OT)
#define DEF_EASY(NAME, ALL, DT, OT, SF, fn)                                                       \
    DEF_BLOCKS(NAME, ALL, DT, OT, n - n % EW_EASY_BLOCK, ,                                       \
        const bool vp = true;                                                                     \
        (void)vp;                                                                                 \
        int easy = 1;                                                                             \
        for (int j = 0; j < EW_EASY_BLOCK; j++)                                                   \
            easy &= MF(fn##_is_easy, DT)(OD_CPU_LD_##DT(x[i + j]));                               \
        if (easy) {                                                                               \
            for (int j = 0; j < EW_EASY_BLOCK; j++)                                               \
                o[i + j] = SF(MF(fn##_easy, DT)(OD_CPU_LD_##DT(x[i + j]), CF(pl, DT)));            \
        } else {                                                                                  \
            for (int j = 0; j < EW_EASY_BLOCK; j++) {                                             \
                CT(DT) a = OD_CPU_LD_##DT(x[i + j]);                                              \
                o[i + j] = SF(MFP(fn, DT)(a, CF(pl, DT)));                                        \
            }                                                                                     \
        })
#define DEF_EASY_(...) DEF_EASY(__VA_ARGS__)
/* The contiguous float32 loop of an operator that vmath512.c has
 * (EW_VM512_<fn>_FLOAT32): its AVX-512 function (streaming a large
 * output's stores; c may be NULL, as for DEF_LOOP1), or ALL's _c loop
 * where that declines (no such CPU or clones); other strides go to ALL. */
#define EW_VM512_exp_FLOAT32 ~, 1
#define EW_VM512_sigmoid_FLOAT32 ~, 1
#define EW_VM512_silu_FLOAT32 ~, 1
#define EW_VM512_tanh_FLOAT32 ~, 1
#define EW_VM512_gelu_erf_FLOAT32 ~, 1
#define EW_VM512_gelu_tanh_FLOAT32 ~, 1
#define DEF_VM512(NAME, ALL, fn)                                                                  \
    static void NAME##_c(char *po, const char *px, int64_t n, const ew_ctx *c)                    \
    {                                                                                             \
        if (!od_cpu_vm512_##fn((float *)po, (const float *)px, n, c && c->stream))                \
            ALL##_c(po, px, n, c);                                                                \
    }                                                                                             \
    EW_CONTIGUOUS_OR(NAME, ALL, FLOAT32, float)
/* DEF_LOOP1(NAME, DT, ...), or with DEF_VM512 over it (named NAME_all)
 * where vmath512.c has fn for DT. */
#define EW_LOOP1_OR_VM512(fn, NAME, DT, ...) \
    CAT(EW_VM512_OR_, EW_PROBE(CAT(EW_VM512_, CAT(fn, CAT(_, DT)))))(fn, NAME, DT, __VA_ARGS__)
#define EW_VM512_OR_0(fn, NAME, DT, ...) DEF_LOOP1_(NAME, DT, __VA_ARGS__)
#define EW_VM512_OR_1(fn, NAME, DT, ...)     \
    DEF_LOOP1_(NAME##_all, DT, __VA_ARGS__) \
    DEF_VM512(NAME, NAME##_all, fn)
/* The contiguous loop of an operator whose libm call od_math.h sets apart
 * (OD_MATH_SPLIT_<fn>: polygamma's trigamma), where od_math_<fn>_splits
 * accepts the parameters: per block of EW_EASY_BLOCK, a scalar pass of
 * od_math_<fn>_pre, then od_math_<fn>_post vectorised; the rest, other
 * parameters and other strides as ALL does it. */
#define DEF_SPLIT(NAME, ALL, DT, OT, SF, fn)                                                      \
    DEF_BLOCKS(NAME, ALL, DT, OT, MF(fn##_splits, DT)(CF(pl, DT)) ? n - n % EW_EASY_BLOCK : 0,    \
               CT(DT) pre[EW_EASY_BLOCK];,                                                        \
        for (int j = 0; j < EW_EASY_BLOCK; j++)                                                   \
            pre[j] = MF(fn##_pre, DT)(OD_CPU_LD_##DT(x[i + j]), CF(pl, DT));                      \
        for (int j = 0; j < EW_EASY_BLOCK; j++)                                                   \
            o[i + j] = SF(MF(fn##_post, DT)(OD_CPU_LD_##DT(x[i + j]), pre[j], CF(pl, DT)));)
#define DEF_SPLIT_(...) DEF_SPLIT(__VA_ARGS__)
/* ATen 1.13's vml kernels (IMPLEMENT_FLOAT_KERNEL / IMPLEMENT_COMPLEX_KERNEL:
 * erf, log, sin, ...) run the Vectorized function on every element: the
 * last n % lanes as one vector padded with zeros (vec::map's partial load),
 * a strided tensor through a contiguous buffer. So do these loops, in
 * blocks of VEC2 (a loop of unknown length would let gcc peel scalar
 * iterations, libm's calls, for alignment): vp is true throughout, the
 * tail is a block padded with zeros, and other strides are gathered
 * EW_VML_CHUNK elements at a time and scattered back. Where od_math.h
 * gives a bound (OD_MATH_VML_BOUND_<fn>: Sleef's sin, cos and tan), a block
 * with an element outside it runs as two halves, AVX2's lanes, which is
 * torch's grouping: there Sleef's vector takes a slower reduction for all
 * its lanes, and their last bit can move. */
#define EW_VML_CHUNK 256
#define EW_VML_HAS_BOUND(fn) EW_PROBE(CAT(OD_MATH_VML_BOUND_, fn))
#define DEF_VML(NAME, DT, OT, SF, EXPR, fn)                                                       \
    static VEC_##DT void NAME##_c(char *po, const char *px, int64_t n)                            \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        enum { W = VEC2_##DT, H = VEC2_##DT / 2 };                                                \
        const bool vp = true;                                                                     \
        (void)vp;                                                                                 \
        const CT(DT) bound = CAT(OD_MATH_TRIG_BOUND_, OD_CPU_FAM_##DT);                           \
        T xb[W];                                                                                  \
        OT ob[W];                                                                                 \
        for (int64_t i = 0; i < n; i += W) {                                                      \
            const T *restrict x = (const T *)px + i;                                              \
            OT *restrict o = (OT *)po + i;                                                        \
            if (n - i < W) { /* the tail: one block padded with zeros */                          \
                memset(xb, 0, sizeof xb);                                                         \
                memcpy(xb, x, (size_t)(n - i) * sizeof(T));                                       \
                x = xb;                                                                           \
                o = ob;                                                                           \
            }                                                                                     \
            int big = 0; /* an element outside od_math's bound */                                 \
            if (EW_VML_HAS_BOUND(fn))                                                             \
                for (int j = 0; j < W; j++) {                                                     \
                    CT(DT) v = OD_CPU_LD_##DT(x[j]);                                              \
                    big |= !(v < bound && v > -bound);                                            \
                }                                                                                 \
            if (big) {                                                                            \
                for (int h = 0; h < W; h += H)                                                    \
                    for (int j = h; j < h + H; j++) {                                             \
                        CT(DT) a = OD_CPU_LD_##DT(x[j]);                                          \
                        o[j] = SF(EXPR);                                                          \
                    }                                                                             \
            } else {                                                                              \
                for (int j = 0; j < W; j++) {                                                     \
                    CT(DT) a = OD_CPU_LD_##DT(x[j]);                                              \
                    o[j] = SF(EXPR);                                                              \
                }                                                                                 \
            }                                                                                     \
            if (o == ob)                                                                          \
                memcpy((OT *)po + i, ob, (size_t)(n - i) * sizeof(OT));                           \
        }                                                                                         \
    }                                                                                             \
    static void NAME(void *vc, char **d, const int64_t *s, int64_t n)                            \
    {                                                                                             \
        typedef OD_CPU_T_##DT T;                                                                  \
        (void)vc;                                                                                 \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T)) {                          \
            NAME##_c(d[0], d[1], n);                                                              \
            return;                                                                               \
        }                                                                                         \
        T xb[EW_VML_CHUNK];                                                                       \
        OT ob[EW_VML_CHUNK];                                                                      \
        for (int64_t i = 0; i < n; i += EW_VML_CHUNK) {                                           \
            int64_t w = n - i < EW_VML_CHUNK ? n - i : EW_VML_CHUNK;                              \
            for (int64_t j = 0; j < w; j++)                                                       \
                memcpy(&xb[j], d[1] + (i + j) * s[1], sizeof(T));                                 \
            NAME##_c((char *)ob, (const char *)xb, w);                                            \
            for (int64_t j = 0; j < w; j++)                                                       \
                memcpy(d[0] + (i + j) * s[0], &ob[j], sizeof(OT));                                \
        }                                                                                         \
    }
#define DEF_VML_(...) DEF_VML(__VA_ARGS__)
#define G_neg(DT) DEF_LOOP1_(neg_##DT, DT, SAME(DT), MF(neg, DT)(a))
#define G_abs(DT) DEF_LOOP1_(abs_##DT, DT, SAME(DT), MF(abs, DT)(a))
#define G_relu(DT) DEF_LOOP1_(relu_##DT, DT, SAME(DT), MF(relu, DT)(a))
#define G_gelu(DT) DEF_LOOP1_(gelu_##DT, DT, SAME(DT), MF(gelu, DT)(a))
/* gelu(approximate='none') where torch 1.13 goes through oneDNN (a contiguous
 * float32/bfloat16 tensor of more than one element): x * Phi(x), written
 * with no calls or branches so gcc vectorises it (Sleef's erff through the
 * vector ABI cost ~4x torch at 1e6). Phi(-t) = exp(-t^2/2) * R(t), R a
 * rational fit (relative error 3e-8 with float coefficients, t in
 * [0, 14.4]). Unlike 1 + erf, this keeps the negative tail accurate (within
 * ~4 x 2^-23 of a double reference everywhere, where oneDNN's and Sleef's
 * 1 + erf return 0 below x = -5.5). Beyond |x| = 14.4 Phi(-|x|) * x is
 * under half the smallest subnormal: 0. gelu(-inf) is NaN, as in torch, and
 * gelu(-0.0) is +0.0 (oneDNN).
 * The exp is od_math_exp_f32's reduction cut to this argument's range,
 * [-103.7, 0]: no clamps and no NaN select (x carries a NaN through), the
 * low part of t^2 (an fma: t^2 = h + l exactly) goes into the reduced
 * argument, the polynomial is one degree lower (a fit with relative error
 * 4e-9, where Sleef's covers any argument to 1 ulp), and 2^n is scaled by
 * 2^64, one normal float for every n here, with 2^-64 applied last so that
 * nothing before the final product is subnormal. The result is x - q or q
 * with one select, q = x * Phi(-|x|). All this is 2x the throughput of the
 * general exp with a separate correction for l and selects for each case
 * (one thread, 64K floats in L2, AMD EPYC). Where vmath512.c runs
 * (contiguous float32 on AVX-512), |x| < 4 takes its table of polynomials
 * instead, and only the rest has these bits. */
/* always_inline: into each target clone, where fmaf is one instruction */
static inline __attribute__((always_inline)) float ew_gelu_erf_f32(float x)
{
    float ax = fabsf(x);
    float t = ax < 14.4f ? ax : 14.4f; /* NaN: 14.4 */
    float h = t * t, l = fmaf(t, t, -h);
    const float magic = OD_MATH_EXP_MAGIC;
    float k = fmaf(h, -0.5f * OD_MATH_LOG2E_F, magic);
    float n = k - magic;
    int32_t ni = (int32_t)(od_f32_bits(k) - od_f32_bits(magic)); /* n, in [-150, 0] */
    float r = fmaf(n, -OD_MATH_LN2_HI_F, -0.5f * h);             /* exact (Cody-Waite) */
    r = fmaf(n, -OD_MATH_LN2_LO_F, r);
    r = fmaf(l, -0.5f, r);
    float p = OD_CPU_GELU_ERF_E4;
    p = fmaf(p, r, OD_CPU_GELU_ERF_E3);
    p = fmaf(p, r, OD_CPU_GELU_ERF_E2);
    p = fmaf(p, r, OD_CPU_GELU_ERF_E1);
    p = fmaf(p, r, OD_CPU_GELU_ERF_E0);
    float y = fmaf(p, r * r, r) + 1.0f;                            /* exp(r) */
    float s = od_f32_from_bits((uint32_t)(ni + 127 + 64) << 23); /* 2^(n + 64) */
    float nu = OD_CPU_GELU_ERF_N4, d = OD_CPU_GELU_ERF_D5;
    nu = fmaf(nu, t, OD_CPU_GELU_ERF_N3);
    nu = fmaf(nu, t, OD_CPU_GELU_ERF_N2);
    nu = fmaf(nu, t, OD_CPU_GELU_ERF_N1);
    nu = fmaf(nu, t, OD_CPU_GELU_ERF_N0);
    d = fmaf(d, t, OD_CPU_GELU_ERF_D4);
    d = fmaf(d, t, OD_CPU_GELU_ERF_D3);
    d = fmaf(d, t, OD_CPU_GELU_ERF_D2);
    d = fmaf(d, t, OD_CPU_GELU_ERF_D1);
    d = fmaf(d, t, 1.0f);
    float q = x * nu * y / d * s * 5.42101086242752217e-20f; /* the last factor is 2^-64 */
    q = ax < 14.4f ? q : 0.0f; /* 0 for |x| >= 14.4 and NaN */
    /* x - x: 0 but NaN for -inf; q + 0 and x - q: +0.0 for -0.0 */
    return x < 0.0f ? q + (x - x) : x - q;
}
#define G_gelu_dnnl(DT) EW_LOOP1_OR_VM512(gelu_erf, gelu_dnnl_##DT, DT, SAME(DT), ew_gelu_erf_f32(a))
#define G_gelu_tanh(DT) EW_LOOP1_OR_VM512(gelu_tanh, gelu_tanh_##DT, DT, SAME(DT), MF(gelu_tanh, DT)(a))
OD_CPU_ALL_DTYPES(G_neg)
OD_CPU_ALL_DTYPES(G_abs)
OD_CPU_ALL_DTYPES(G_relu)
OD_CPU_FLOAT_DTYPES(G_gelu)
G_gelu_dnnl(FLOAT32) G_gelu_dnnl(BFLOAT16)
OD_CPU_FLOAT_DTYPES(G_gelu_tanh)

/* The per-element operators of ops.def (OD_EW1 / OD_EW2 lines): one loop
 * per (operator, dtype of its rule), named ew_<id>_<DT>. The output is the
 * compute dtype, or bool for LOGICAL; INT_DIV guards integer divisors. */
#define EW_OUT_0(DT) SAME(DT)
#define EW_OUT_1(DT) bool, ST_SAME
#define EW_OUT(rule, DT) CAT(EW_OUT_, OD_EWR_BOOL_OUT_##rule)(DT)
static inline bool ew_zero_i64(int64_t b, int *zf)
{
    if (b != 0)
        return false;
    *zf = 1;
    return true;
}
static inline bool ew_zero_f32(float b, int *zf) { (void)b; (void)zf; return false; }
static inline bool ew_zero_f64(double b, int *zf) { (void)b; (void)zf; return false; }
/* gcd and lcm compute in the tensor's own width (od_math_gcd_bits_i64). */
#define OD_MATH_BITS_gcd ~, 1
#define OD_MATH_BITS_lcm ~, 1
#define EW_BITS_UINT8 64
#define EW_BITS_INT8 8
#define EW_BITS_INT16 16
#define EW_BITS_INT32 32
#define EW_BITS_INT64 64
#define MFB_0(fn, DT) MFP(fn, DT)(a, b)
#define MFB_1(fn, DT) od_math_##fn##_bits_i64(a, b, EW_BITS_##DT)
#define EW_X2_0(fn, DT) CAT(MFB_, EW_PROBE(CAT(OD_MATH_BITS_, fn)))(fn, DT)
#define EW_X2_1(fn, DT) (CAT(ew_zero_, OD_CPU_FAM_##DT)(b, &zf) ? 0 : MFP(fn, DT)(a, b))
#define EW_X2(rule, fn, DT) CAT(EW_X2_, OD_EWR_ZERO_DIV_##rule)(fn, DT)
/* OD_EW1 loops; an operator that od_math.h marks OD_MATH_VML_<fn> takes
 * DEF_VML's loops in float32, float64 and bfloat16 (ATen's Vectorized
 * kernels there; its float16 one maps the scalar function) */
#define EW_VML_FLOAT32 ~, 1
#define EW_VML_FLOAT64 ~, 1
#define EW_VML_BFLOAT16 ~, 1
#define G_EW1_0(DT, id, fn, rule) EW_LOOP1_OR_VM512(fn, ew_##id##_##DT, DT, EW_OUT(rule, DT), MFP(fn, DT)(a))
#define G_EW1_V1(DT, id, fn, rule) DEF_VML_(ew_##id##_##DT, DT, EW_OUT(rule, DT), MFP(fn, DT)(a), fn)
#define G_EW1_1(DT, id, fn, rule) CAT(G_EW1_V, EW_PROBE(CAT(EW_VML_, DT)))(DT, id, fn, rule)
#define G_EW1_V0 G_EW1_0
#define G_EW1(DT, id, fn, rule) CAT(G_EW1_, EW_PROBE(CAT(OD_MATH_VML_, fn)))(DT, id, fn, rule)
/* OD_EW2 loops; where vmath512.c has fn for DT (EW_VM512_<fn>_<DT>: int32
 * gcd and lcm), three contiguous operands go to its function first, the
 * rest and a decline to the generic loops (named _all) */
#define EW_VM512_gcd_INT32 ~, 1
#define EW_VM512_lcm_INT32 ~, 1
#define G_EW2_0(DT, id, fn, rule) DEF_LOOP2_(ew_##id##_##DT, DT, EW_OUT(rule, DT), EW_X2(rule, fn, DT))
#define G_EW2_1(DT, id, fn, rule)                                                                 \
    G_EW2_0(DT, id##_all, fn, rule)                                                               \
    static void ew_##id##_##DT(void *vc, char **d, const int64_t *s, int64_t n)                  \
    {                                                                                             \
        const int64_t e = (int64_t)sizeof(OD_CPU_T_##DT);                                        \
        bool contiguous = s[0] == e && s[1] == e && s[2] == e;                                    \
        if (!(contiguous && od_cpu_vm512_##fn##_i32((void *)d[0], (void *)d[1], (void *)d[2], n))) \
            ew_##id##_all_##DT(vc, d, s, n);                                                      \
    }
#define G_EW2(DT, id, fn, rule) CAT(G_EW2_, EW_PROBE(CAT(EW_VM512_, CAT(fn, CAT(_, DT)))))(DT, id, fn, rule)
/* An OD_EWP operator whose od_math.h marks OD_MATH_EASY_<fn> (elu) or
 * OD_MATH_SPLIT_<fn> (polygamma) gets its own contiguous loop, DEF_EASY or
 * DEF_SPLIT, over the generic one (named _all). */
#define G_EWP_0(DT, id, fn, rule) CAT(G_EWP_S, EW_PROBE(CAT(OD_MATH_SPLIT_, fn)))(DT, id, fn, rule)
#define G_EWP_S0(DT, id, fn, rule) DEF_LOOP1_(ew_##id##_##DT, DT, EW_OUT(rule, DT), MFP(fn, DT)(a, CF(pl, DT)))
#define G_EWP_S1(DT, id, fn, rule)                                                                \
    DEF_LOOP1_(ew_##id##_all_##DT, DT, EW_OUT(rule, DT), MFP(fn, DT)(a, CF(pl, DT)))             \
    DEF_SPLIT_(ew_##id##_##DT, ew_##id##_all_##DT, DT, EW_OUT(rule, DT), fn)
#define G_EWP_1(DT, id, fn, rule)                                                                 \
    DEF_LOOP1_(ew_##id##_all_##DT, DT, EW_OUT(rule, DT), MFP(fn, DT)(a, CF(pl, DT)))             \
    DEF_EASY_(ew_##id##_##DT, ew_##id##_all_##DT, DT, EW_OUT(rule, DT), fn)
#define G_EWP(DT, id, fn, rule) CAT(G_EWP_, EW_PROBE(CAT(OD_MATH_EASY_, fn)))(DT, id, fn, rule)
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW1(id, schema, fn, rule, ag) OD_EWR_DTYPES_##rule(G_EW1, id, fn, rule)
#define OD_EW2(id, schema, fn, rule, ag) OD_EWR_DTYPES_##rule(G_EW2, id, fn, rule)
#define OD_EWP(id, schema, fn, rule, ag) OD_EWR_DTYPES_##rule(G_EWP, id, fn, rule)
#include "ops.def"
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP

#define G_clamp(DT) DEF_CLAMP(clamp_##DT, DT)
OD_CPU_ALL_DTYPES(G_clamp)

/* where: the element is copied, not computed, so one loop per element size.
 * The loops read both sources whatever the condition: loads under a
 * condition are not if-converted (they might fault), so the loop stayed a
 * branch per element, mispredicted on mixed conditions (1e6 float32 at half
 * true: 3.0 ms, torch's 2.5); read unconditionally it is a vector blend.
 * A source broadcast along the loop (stride 0: a Scalar, or the expanded
 * gradient every backward pass starts from, as in relu's backward
 * where(x > 0, g, 0)) is read once, so those patterns take the same blend
 * instead of the strided loop's branch (where.ScalarOther over 1e6 float32
 * at half true: 3.3 -> 0.17 ms, torch 3.2; ops_torch.py --family rest). */
#define WHERE_LOOP_(T, XA, XB)                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                             \
        T x = (XA), y = (XB);                                                                     \
        o[i] = m[i] ? x : y;                                                                      \
    }
#define DEF_WHERE(NAME, T)                                                                        \
    OD_CPU_CLONES static void NAME##_c(char *po, const char *pc, const char *pa, const char *pb,  \
                                       int64_t n, bool a_bcast, bool b_bcast)                     \
    {                                                                                             \
        T *restrict o = (T *)po;                                                                  \
        const uint8_t *restrict m = (const uint8_t *)pc;                                          \
        const T *restrict a = (const T *)pa;                                                      \
        const T *restrict b = (const T *)pb;                                                      \
        if (!a_bcast && !b_bcast) {                                                               \
            WHERE_LOOP_(T, a[i], b[i])                                                            \
        } else if (!a_bcast) {                                                                    \
            const T b0 = b[0];                                                                    \
            WHERE_LOOP_(T, a[i], b0)                                                              \
        } else if (!b_bcast) {                                                                    \
            const T a0 = a[0];                                                                    \
            WHERE_LOOP_(T, a0, b[i])                                                              \
        } else {                                                                                  \
            const T a0 = a[0], b0 = b[0];                                                         \
            WHERE_LOOP_(T, a0, b0)                                                                \
        }                                                                                         \
    }                                                                                             \
    static void NAME(void *vc, char **d, const int64_t *s, int64_t n)                            \
    {                                                                                             \
        const int64_t e = (int64_t)sizeof(T);                                                     \
        (void)vc;                                                                                 \
        if (s[0] == e && s[1] == 1 && (s[2] == e || s[2] == 0) && (s[3] == e || s[3] == 0)) {     \
            NAME##_c(d[0], d[1], d[2], d[3], n, s[2] == 0, s[3] == 0);                            \
            return;                                                                               \
        }                                                                                         \
        char *po = d[0];                                                                          \
        const char *pc = d[1], *pa = d[2], *pb = d[3];                                            \
        for (int64_t i = 0; i < n; i++, po += s[0], pc += s[1], pa += s[2], pb += s[3])           \
            *(T *)po = *(const uint8_t *)pc ? *(const T *)pa : *(const T *)pb;                    \
    }
DEF_WHERE(where8, uint8_t)
DEF_WHERE(where16, uint16_t)
DEF_WHERE(where32, uint32_t)
DEF_WHERE(where64, uint64_t)
#undef WHERE_LOOP_


/* lerp, addcmul, addcdiv, nextafter: ATen 1.13's CPU kernels, one strided
 * loop per dtype. Operands: out, self, then the others converted to the
 * compute dtype; bfloat16 computes in float (opmath) and rounds once. When
 * every operand is contiguous, the same expression runs in NAME_c, which
 * gcc vectorises in the AVX2 and AVX-512 clones (float32 and float64):
 * the strided loop, compiled for the baseline, also calls libm for each
 * fmaf (lerp over 1e6 floats: 3.1 ms, torch 0.27). The parameters are
 * read into locals first (a store through o could change *c otherwise). */
#define DEF_PW(NAME, DT, NIN, EXPR)                                                                   \
    static VEC_##DT void NAME##_c(char *po, const char *p1, const char *p2, const char *p3, int64_t n, \
                                  const ew_ctx *cp)                                                   \
    {                                                                                                 \
        typedef OD_CPU_T_##DT T;                                                                      \
        const ew_ctx cl = *cp, *c = &cl;                                                              \
        (void)c;                                                                                      \
        T *restrict o = (T *)po;                                                                      \
        const T *restrict x = (const T *)p1, *restrict y = (const T *)p2, *restrict z = (const T *)p3; \
        (void)z;                                                                                      \
        for (int64_t i = 0; i < n; i++) {                                                             \
            CT(DT) a = OD_CPU_LD_##DT(x[i]);                                                          \
            CT(DT) b = OD_CPU_LD_##DT(y[i]);                                                          \
            CT(DT) w = NIN > 2 ? OD_CPU_LD_##DT(z[i]) : 0;                                            \
            (void)w;                                                                                  \
            o[i] = OD_CPU_ST_##DT(EXPR);                                                              \
        }                                                                                             \
    }                                                                                                 \
    static void NAME(void *vc, char **d, const int64_t *s, int64_t n)                                 \
    {                                                                                                 \
        const ew_ctx *c = vc;                                                                         \
        (void)c;                                                                                      \
        const int64_t e = (int64_t)sizeof(OD_CPU_T_##DT);                                             \
        if (s[0] == e && s[1] == e && s[2] == e && (NIN < 3 || s[NIN > 2 ? 3 : 2] == e)) {             \
            NAME##_c(d[0], d[1], d[2], d[NIN > 2 ? 3 : 2], n, c);                                     \
            return;                                                                                   \
        }                                                                                             \
        for (int64_t i = 0; i < n; i++) {                                                             \
            CT(DT) a = OD_CPU_LD_##DT(*(const OD_CPU_T_##DT *)(d[1] + i * s[1]));                     \
            CT(DT) b = OD_CPU_LD_##DT(*(const OD_CPU_T_##DT *)(d[2] + i * s[2]));                     \
            CT(DT) w = NIN > 2 ? OD_CPU_LD_##DT(*(const OD_CPU_T_##DT *)(d[NIN > 2 ? 3 : 2] + i * s[NIN > 2 ? 3 : 2])) : 0; \
            (void)w;                                                                                  \
            *(OD_CPU_T_##DT *)(d[0] + i * s[0]) = OD_CPU_ST_##DT(EXPR);                               \
        }                                                                                             \
    }
#define G_lerp(DT) DEF_PW(lerp_##DT, DT, 3, MF(lerp, DT)(a, b, w))
G_lerp(BFLOAT16) G_lerp(FLOAT32) G_lerp(FLOAT64)
/* lerp.Scalar: weight.to<opmath_t>() (float for bfloat16), in the context */
#define G_lerps(DT) DEF_PW(lerps_##DT, DT, 2, MF(lerp, DT)(a, b, c->CF(alpha, DT)))
G_lerps(BFLOAT16) G_lerps(FLOAT32) G_lerps(FLOAT64)
/* value: the constant of the family (ew_ctx's alpha) */
#define G_addcmul(DT) DEF_PW(addcmul_##DT, DT, 3, MF(addcmul, DT)(a, b, w, c->CF(alpha, DT)))
G_addcmul(UINT8) G_addcmul(INT8) G_addcmul(INT16) G_addcmul(INT32) G_addcmul(INT64)
G_addcmul(BFLOAT16) G_addcmul(FLOAT32) G_addcmul(FLOAT64)
#define G_addcdiv(DT) DEF_PW(addcdiv_##DT, DT, 3, MF(addcdiv, DT)(a, b, w, c->CF(alpha, DT)))
G_addcdiv(BFLOAT16) G_addcdiv(FLOAT32) G_addcdiv(FLOAT64)
DEF_PW(nextafter_FLOAT32, FLOAT32, 2, od_math_nextafter_f32(a, b))
DEF_PW(nextafter_FLOAT64, FLOAT64, 2, od_math_nextafter_f64(a, b))
/* c10's nextafter(BFloat16, BFloat16): musl's, on the 16 bits */
static void nextafter_BFLOAT16(void *vc, char **d, const int64_t *s, int64_t n)
{
    (void)vc;
    for (int64_t i = 0; i < n; i++) {
        uint16_t fb = *(const uint16_t *)(d[1] + i * s[1]), tb = *(const uint16_t *)(d[2] + i * s[2]);
        *(uint16_t *)(d[0] + i * s[0]) = od_math_nextafter_bf16(fb, tb);
    }
}

/* ---- tables ------------------------------------------------------------------------ */

#define E_(op, DT) [OD_##DT] = op##_##DT,
#define TABLE_ALL(op)                                                                          \
    {E_(op, BOOL) E_(op, UINT8) E_(op, INT8) E_(op, INT16) E_(op, INT32) E_(op, INT64)        \
         E_(op, FLOAT16) E_(op, BFLOAT16) E_(op, FLOAT32) E_(op, FLOAT64)}
#define TABLE_FLT(op) {E_(op, FLOAT16) E_(op, BFLOAT16) E_(op, FLOAT32) E_(op, FLOAT64)}

typedef od_cpu_loop_fn loop_table[OD_NUM_DTYPES];

enum { B_ADD, B_SUB, B_MUL, B_DIV, B_DIVT, B_DIVF, B_POW, B_POWS, B_MAX, B_MIN, NUM_B };
static const loop_table g_binary[NUM_B] = {
    [B_ADD] = TABLE_ALL(add),   [B_SUB] = TABLE_ALL(add), /* alpha negated */   [B_MUL] = TABLE_ALL(mul),
    [B_DIV] = TABLE_FLT(div),   [B_DIVT] = TABLE_ALL(divt), [B_DIVF] = TABLE_ALL(divf),
    [B_POW] = TABLE_ALL(pow),   [B_MAX] = TABLE_ALL(max),   [B_MIN] = TABLE_ALL(min),
    /* float32 and float64: the general kind here, the others from g_pows */
    [B_POWS] = {E_(pows, FLOAT16) E_(pows, BFLOAT16) E_(pows_gen, FLOAT32) E_(pows_gen, FLOAT64)},
};

#define TABLE_FD(op) {E_(op, FLOAT32) E_(op, FLOAT64)}
static const loop_table g_pows[NUM_POW] = {
    [POW_GENERAL] = TABLE_FD(pows_gen),      [POW_SQRT] = TABLE_FD(pows_sqrt),
    [POW_RSQRT] = TABLE_FD(pows_rsqrt),      [POW_RECIP] = TABLE_FD(pows_recip),
    [POW_SQUARE] = TABLE_FD(pows_square),    [POW_CUBE] = TABLE_FD(pows_cube),
    [POW_RSQUARE] = TABLE_FD(pows_rsquare),
};

enum { C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, NUM_C };
static const loop_table g_compare[NUM_C] = {
    [C_EQ] = TABLE_ALL(eq), [C_NE] = TABLE_ALL(ne), [C_LT] = TABLE_ALL(lt),
    [C_LE] = TABLE_ALL(le), [C_GT] = TABLE_ALL(gt), [C_GE] = TABLE_ALL(ge),
};

enum { U_NEG, U_ABS, U_RELU, U_GELU, U_GELU_TANH, U_GELU_DNNL, NUM_U };
static const loop_table g_unary[NUM_U] = {
    [U_NEG] = TABLE_ALL(neg),   [U_ABS] = TABLE_ALL(abs),             [U_RELU] = TABLE_ALL(relu),
    [U_GELU] = TABLE_FLT(gelu), [U_GELU_TANH] = TABLE_FLT(gelu_tanh),
    [U_GELU_DNNL] = {E_(gelu_dnnl, FLOAT32) E_(gelu_dnnl, BFLOAT16)},
};

/* Loops of the OD_EW1 / OD_EW2 operators, by operator id and compute dtype. */
#define EW_E_(DT, id) [OD_##DT] = ew_##id##_##DT,
static const loop_table g_ew[OD_NUM_BUILTIN_OPS] = {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW1(id, schema, fn, rule, ag) [OD_OPID_##id] = {OD_EWR_DTYPES_##rule(EW_E_, id)},
#define OD_EW2(id, schema, fn, rule, ag) [OD_OPID_##id] = {OD_EWR_DTYPES_##rule(EW_E_, id)},
#define OD_EWP(id, schema, fn, rule, ag) [OD_OPID_##id] = {OD_EWR_DTYPES_##rule(EW_E_, id)},
#include "ops.def"
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP
};

static const loop_table g_clamp = TABLE_ALL(clamp);

/* ---- kernel plumbing ------------------------------------------------------------------ */

/* Every tensor argument must be a CPU tensor: this kernel reads its memory. */
static od_status check_cpu(const od_op *op, const od_stack *s, od_error *err)
{
    for (int i = 0; i < s->nargs; i++) {
        if (s->args[i].tag != OD_T_TENSOR || !s->args[i].u.t)
            continue;
        const od_tensor *t = s->args[i].u.t;
        if (t->device.type != OD_DEV_CPU || (!od_tensor_data(t) && od_tensor_numel(t) > 0)) {
            char dev[32];
            od_device_print(t->device, dev, sizeof dev);
            return od_error_set(err, OD_EMISMATCH, "%s: the CPU kernel got a tensor on %s (argument %d)",
                                op ? od_op_name(op) : "op", dev, i + 1);
        }
    }
    return OD_OK;
}

/* Operands converted to the compute dtype; owns the converted copies. */
typedef struct operands {
    od_cpu_operand op[OD_CPU_ITER_MAX_OPS];
    od_tensor *owned[OD_CPU_ITER_MAX_OPS];
    union {
        int64_t i;
        double d;
        char bytes[8];
    } scalar[OD_CPU_ITER_MAX_OPS];
    int n;
} operands;

static void operands_release(operands *o)
{
    for (int k = 0; k < o->n; k++) {
        od_tensor_release(o->owned[k]);
        o->owned[k] = NULL;
    }
}

/* Adds argument v (a tensor or a number, borrowed) as operand n, as dtype dt. */
static od_status operands_add(operands *o, const od_value *v, od_dtype dt, od_error *err)
{
    int k = o->n++;
    o->owned[k] = NULL;
    if (v->tag == OD_T_TENSOR) {
        od_tensor *t = v->u.t;
        if (t->dtype != dt) {
            od_status st = od_cpu_to_dtype(t, dt, &o->owned[k], err);
            if (st)
                return st;
            t = o->owned[k];
        }
        o->op[k] = od_cpu_operand_of(t);
        return OD_OK;
    }
    od_cpu_scalar_to_dtype(v, dt, o->scalar[k].bytes);
    o->op[k] = od_cpu_operand_scalar(o->scalar[k].bytes, od_dtype_size(dt));
    return OD_OK;
}

/* Runs loop over out and the operands, then returns out (or releases it and
 * reports a division by zero). Consumes out and the operands. */
static od_status run_and_return(od_stack *s, od_tensor *out, operands *o, od_cpu_loop_fn loop,
                                ew_ctx *c, od_error *err)
{
    od_cpu_iter it;
    o->op[0] = od_cpu_operand_of(out);
    c->stream = (int64_t)od_tensor_nbytes(out) >= OD_CPU_STREAM_BYTES;
    od_status st = od_cpu_iter_build(&it, out->sizes, out->ndim, o->op, o->n, err);
    if (st == OD_OK) {
        od_cpu_iter_run(&it, loop, c, OD_CPU_GRAIN);
        if (atomic_load(&c->zero_div))
            st = od_error_set(err, OD_EINVAL, OD_MSG_ZERO_DIVISION);
    }
    operands_release(o);
    return od_cpu_return1(s, out, st);
}

/* Every output here is written whole by the iterator (run_and_return), or
 * released unread on an error: no need to clear it first. */
static od_status alloc_out(const od_stack *s, const od_out_spec *spec, od_tensor **out, od_error *err)
{
    return od_alloc_outputs_overwrite(s, spec, 1, out, err);
}

static void ctx_init(ew_ctx *c)
{
    memset(c, 0, sizeof *c);
    atomic_init(&c->zero_div, 0);
}

/* The common tail of the kernels: converts args[0..n) to dt, allocates the
 * output of spec, runs loop (with the constants of c, or none when c is
 * NULL) and returns the output. */
static od_status run_inputs(od_stack *s, const od_out_spec *spec, int n, od_dtype dt, od_cpu_loop_fn loop,
                            ew_ctx *c, od_error *err)
{
    ew_ctx none;
    if (!c) {
        ctx_init(&none);
        c = &none;
    }
    operands o = {.n = 1};
    od_tensor *out = NULL;
    od_status st = OD_OK;
    for (int i = 0; i < n && !st; i++) {
        /* ATen converts a permuted dense input keeping its strides (others
         * become contiguous), so with another operand its loop is strided
         * where our converted copy is not */
        const od_value *v = &s->args[i];
        if (n > 1 && v->tag == OD_T_TENSOR && v->u.t->dtype != dt && !od_tensor_is_contiguous(v->u.t) &&
            od_tensor_is_non_overlapping_and_dense(v->u.t))
            c->scalar_path = true;
        st = operands_add(&o, v, dt, err);
    }
    if (st || (st = alloc_out(s, spec, &out, err))) {
        operands_release(&o);
        return st;
    }
    return run_and_return(s, out, &o, loop, c, err);
}

static int binary_kind(od_opid id, int mode)
{
    switch (id) {
    case OD_OPID_add_Tensor: case OD_OPID_add_Scalar: return B_ADD;
    case OD_OPID_sub_Tensor: case OD_OPID_sub_Scalar: return B_SUB;
    case OD_OPID_mul_Tensor: case OD_OPID_mul_Scalar: return B_MUL;
    case OD_OPID_div_Tensor: case OD_OPID_div_Scalar:
    case OD_OPID_div_Tensor_mode: case OD_OPID_div_Scalar_mode:
        return mode == OD_DIV_TRUNC ? B_DIVT : mode == OD_DIV_FLOOR ? B_DIVF : B_DIV;
    case OD_OPID_pow_Tensor_Tensor: case OD_OPID_pow_Scalar: return B_POW;
    case OD_OPID_pow_Tensor_Scalar: return B_POWS; /* B_POW for integers */
    case OD_OPID_maximum: return B_MAX;
    case OD_OPID_minimum: return B_MIN;
    default: return -1;
    }
}

static od_status no_loop(const od_op *op, od_dtype dt, od_error *err)
{
    return od_error_set(err, OD_EUNSUPPORTED, "%s: no CPU loop for dtype %s",
                        op ? od_op_name(op) : "op", od_dtype_name(dt));
}

/* ---- kernels ---------------------------------------------------------------------------- */

od_status od_cpu_binary(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0, mode = OD_DIV_TRUE;
    od_status st;
    if ((st = od_shape_binary(id, s, &spec, &nouts, err)) || (st = check_cpu(op, s, err)) ||
        (st = od_div_rounding_mode(id, s, &mode, err)))
        return st;
    int kind = binary_kind(id, mode);
    od_dtype dt = spec.dtype;
    if (kind == B_POWS && !od_dtype_is_floating(dt))
        kind = B_POW;
    od_cpu_loop_fn loop = kind >= 0 ? g_binary[kind][dt] : NULL;
    if (!loop)
        return no_loop(op, dt, err);
    ew_ctx c;
    ctx_init(&c);
    if (kind == B_ADD || kind == B_SUB) {
        od_value alpha = od_add_alpha(id, &s->args[2], dt);
        if (kind == B_SUB) /* sub is add with the alpha od_add_alpha negated */
            loop = g_binary[B_ADD][dt];
        c.alpha_i64 = alpha.tag == OD_T_INT ? alpha.u.i : alpha.tag == OD_T_BOOL ? alpha.u.b
                                                                                 : od_double_to_i64(alpha.u.d);
        c.alpha_f64 = od_value_as_double(&alpha);
        c.alpha_f32 = (float)c.alpha_f64;
        if (alpha.tag == OD_T_INT && od_dtype_is_floating(dt)) {
            c.alpha_f64 = (double)alpha.u.i;
            c.alpha_f32 = (float)alpha.u.i;
        }
        /* ATen takes alpha as the dtype: alpha.to<c10::Half>() */
        if (dt == OD_FLOAT16)
            c.alpha_f32 = OD_CPU_RND_FLOAT16(c.alpha_f32);
        else if (dt == OD_BFLOAT16)
            c.alpha_f32 = OD_CPU_RND_BFLOAT16(c.alpha_f32);
    }
    if (kind == B_POWS) {
        double e = od_value_as_double(&s->args[1]);
        bool fd = dt == OD_FLOAT32 || dt == OD_FLOAT64;
        c.pow_kind = dt == OD_FLOAT16 ? POW_GENERAL : e == 0.5 ? POW_SQRT : e == -0.5 ? POW_RSQRT
                   : e == -1.0 ? POW_RECIP : !fd ? POW_GENERAL : e == 2.0 ? POW_SQUARE
                   : e == 3.0 ? POW_CUBE : e == -2.0 ? POW_RSQUARE : POW_GENERAL;
        if (fd)
            loop = g_pows[c.pow_kind][dt];
        /* exp.to<scalar_t>() for the 16-bit types, a double otherwise */
        c.pow_exp = dt == OD_FLOAT16 ? OD_CPU_RND_FLOAT16((float)e)
                  : dt == OD_BFLOAT16 ? OD_CPU_RND_BFLOAT16((float)e) : e;
    }
    return run_inputs(s, &spec, 2, dt, loop, &c, err);
}

od_status od_cpu_compare(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_dtype dt;
    od_status st;
    if ((st = od_shape_compare(id, s, &spec, &nouts, err)) || (st = check_cpu(op, s, err)) ||
        (st = od_elementwise_common_dtype(id, s, &dt, err)))
        return st;
    int kind;
    switch (id) {
    case OD_OPID_eq_Tensor: case OD_OPID_eq_Scalar: kind = C_EQ; break;
    case OD_OPID_ne_Tensor: case OD_OPID_ne_Scalar: kind = C_NE; break;
    case OD_OPID_lt_Tensor: case OD_OPID_lt_Scalar: kind = C_LT; break;
    case OD_OPID_le_Tensor: case OD_OPID_le_Scalar: kind = C_LE; break;
    case OD_OPID_gt_Tensor: case OD_OPID_gt_Scalar: kind = C_GT; break;
    case OD_OPID_ge_Tensor: case OD_OPID_ge_Scalar: kind = C_GE; break;
    default: return no_loop(op, dt, err);
    }
    od_cpu_loop_fn loop = g_compare[kind][dt];
    if (!loop)
        return no_loop(op, dt, err);
    return run_inputs(s, &spec, 2, dt, loop, NULL, err);
}

od_status od_cpu_where(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_shape_where(id, s, &spec, &nouts, err)) || (st = check_cpu(op, s, err)))
        return st;
    od_dtype dt = spec.dtype;
    od_cpu_loop_fn loop;
    switch (od_dtype_size(dt)) {
    case 1: loop = where8; break;
    case 2: loop = where16; break;
    case 4: loop = where32; break;
    case 8: loop = where64; break;
    default: return no_loop(op, dt, err);
    }
    ew_ctx c;
    ctx_init(&c);
    operands o = {.n = 1};
    od_tensor *out = NULL;
    /* condition keeps its own (1-byte) dtype: bool or uint8. */
    if ((st = operands_add(&o, &s->args[0], s->args[0].u.t->dtype, err)) ||
        (st = operands_add(&o, &s->args[1], dt, err)) || (st = operands_add(&o, &s->args[2], dt, err)) ||
        (st = alloc_out(s, &spec, &out, err))) {
        operands_release(&o);
        return st;
    }
    return run_and_return(s, out, &o, loop, &c, err);
}

od_status od_cpu_pointwise(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_shape_pointwise(id, s, &spec, &nouts, err)) || (st = check_cpu(op, s, err)))
        return st;
    static const loop_table lerp = {E_(lerp, BFLOAT16) E_(lerp, FLOAT32) E_(lerp, FLOAT64)};
    static const loop_table lerps = {E_(lerps, BFLOAT16) E_(lerps, FLOAT32) E_(lerps, FLOAT64)};
    static const loop_table addcmul = {E_(addcmul, UINT8) E_(addcmul, INT8) E_(addcmul, INT16)
                                           E_(addcmul, INT32) E_(addcmul, INT64) E_(addcmul, BFLOAT16)
                                               E_(addcmul, FLOAT32) E_(addcmul, FLOAT64)};
    static const loop_table addcdiv = {E_(addcdiv, BFLOAT16) E_(addcdiv, FLOAT32) E_(addcdiv, FLOAT64)};
    static const loop_table next = {E_(nextafter, BFLOAT16) E_(nextafter, FLOAT32) E_(nextafter, FLOAT64)};
    od_dtype dt = spec.dtype;
    bool addc = id == OD_OPID_addcmul || id == OD_OPID_addcdiv;
    const loop_table *t = id == OD_OPID_nextafter ? &next : id == OD_OPID_addcmul ? &addcmul
                        : id == OD_OPID_addcdiv ? &addcdiv : id == OD_OPID_lerp_Scalar ? &lerps : &lerp;
    od_cpu_loop_fn loop = (*t)[dt];
    if (!loop)
        return no_loop(op, dt, err);
    ew_ctx c;
    ctx_init(&c);
    if (addc || id == OD_OPID_lerp_Scalar) { /* value.to<scalar_t>(), weight.to<opmath_t>();
                                                * bfloat16 takes them as float */
        const od_value *v = &s->args[addc ? 3 : 2];
        c.alpha_f64 = od_value_as_double(v);
        c.alpha_f32 = (float)c.alpha_f64;
        c.alpha_i64 = v->tag == OD_T_INT ? v->u.i : v->tag == OD_T_BOOL ? v->u.b : od_double_to_i64(c.alpha_f64);
    }
    return run_inputs(s, &spec, id == OD_OPID_nextafter || id == OD_OPID_lerp_Scalar ? 2 : 3, dt, loop, &c, err);
}

od_status od_cpu_unary(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_shape_unary(id, s, &spec, &nouts, err)) || (st = check_cpu(op, s, err)))
        return st;
    int kind;
    switch (id) {
    case OD_OPID_neg: kind = U_NEG; break;
    case OD_OPID_abs: kind = U_ABS; break;
    case OD_OPID_relu: kind = U_RELU; break;
    case OD_OPID_gelu: {
        bool tanh_form;
        if ((st = od_gelu_approximate(s, &tanh_form, err)))
            return st;
        kind = tanh_form ? U_GELU_TANH : U_GELU;
        /* torch 1.13's oneDNN condition (use_mkldnn): its gelu(-0.0) is +0.0 */
        const od_tensor *x = s->args[0].u.t;
        if (!tanh_form && od_tensor_is_contiguous(x) && od_tensor_numel(x) > 1)
            kind = U_GELU_DNNL;
        break;
    }
    default: return no_loop(op, spec.dtype, err);
    }
    od_dtype dt = spec.dtype;
    od_cpu_loop_fn loop = g_unary[kind][dt];
    if (!loop && kind == U_GELU_DNNL) /* other dtypes never reach oneDNN */
        loop = g_unary[U_GELU][dt];
    if (!loop)
        return no_loop(op, dt, err);
    return run_inputs(s, &spec, 1, dt, loop, NULL, err);
}

/* Every OD_EW1 / OD_EW2 operator of ops.def: its rule gives the compute
 * dtype, g_ew the loop, and the inputs are its first one or two arguments. */
od_status od_cpu_ew(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_shape_ew(id, s, &spec, &nouts, err)) || (st = check_cpu(op, s, err)))
        return st;
    od_dtype dt = spec.dtype;
    if (od_ew_rule_of(id) == OD_EWR_LOGICAL && (st = od_elementwise_common_dtype(id, s, &dt, err)))
        return st;
    od_cpu_loop_fn loop = g_ew[id][dt];
    if (!loop)
        return no_loop(op, dt, err);
    int self = od_ew_self_arg(id);
    if (self < 0)
        return run_inputs(s, &spec, s->nargs, dt, loop, NULL, err);
    /* OD_EWP: one tensor input, the parameters in the loop context */
    od_ew_params p;
    if ((st = od_ew_params_of(id, s, dt, &p, err)))
        return st;
    ew_ctx c;
    ctx_init(&c);
    for (int k = 0; k < OD_EW_MAX_PARAMS; k++) {
        /* (a double parameter of float64 may not fit a float: inf, not UB) */
        c.p_f32[k] = p.d[k] > FLT_MAX ? INFINITY : p.d[k] < -FLT_MAX ? -INFINITY : (float)p.d[k];
        c.p_f64[k] = p.d[k];
        c.p_i64[k] = p.i[k];
    }
    operands o = {.n = 1};
    od_tensor *out = NULL;
    if ((st = operands_add(&o, &s->args[self], dt, err)) || (st = alloc_out(s, &spec, &out, err))) {
        operands_release(&o);
        return st;
    }
    return run_and_return(s, out, &o, loop, &c, err);
}

/* The bound a missing min/max stands for: the dtype's extreme (-inf/+inf for
 * floating dtypes), so one clamp loop serves every combination. */
static void clamp_sentinel(od_dtype dt, bool upper, void *buf)
{
    od_value v;
    if (dt == OD_BOOL) {
        v = od_bool(upper);
    } else if (od_dtype_is_floating(dt)) {
        v = od_double(upper ? INFINITY : -INFINITY);
    } else {
        int bits = (int)od_dtype_size(dt) * 8;
        int64_t lo = dt == OD_UINT8 ? 0 : bits == 64 ? INT64_MIN : -((int64_t)1 << (bits - 1));
        int64_t hi = dt == OD_UINT8 ? 255 : bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
        v = od_int(upper ? hi : lo);
    }
    od_cpu_scalar_to_dtype(&v, dt, buf);
}

od_status od_cpu_clamp(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_shape_clamp(id, s, &spec, &nouts, err)) || (st = check_cpu(op, s, err)))
        return st;
    od_dtype dt = spec.dtype;
    od_cpu_loop_fn loop = g_clamp[dt];
    if (!loop)
        return no_loop(op, dt, err);
    ew_ctx c;
    ctx_init(&c);
    operands o = {.n = 1};
    od_tensor *out = NULL;
    if ((st = operands_add(&o, &s->args[0], dt, err)))
        goto fail;
    /* A NaN Scalar bound alone leaves the input (ATen's clamp_min/max
     * kernels); with the other bound given it stays, and the clamp's NaN
     * rule fills the output with NaN, as ATen does. */
    bool fills_nan = od_clamp_fills_nan(id, s);
    for (int i = 1; i <= 2; i++) {
        const od_value *b = &s->args[i];
        if (b->tag == OD_T_NONE || (b->tag == OD_T_DOUBLE && isnan(b->u.d) && !fills_nan)) {
            int k = o.n++;
            o.owned[k] = NULL;
            clamp_sentinel(dt, i == 2, o.scalar[k].bytes);
            o.op[k] = od_cpu_operand_scalar(o.scalar[k].bytes, od_dtype_size(dt));
        } else if ((st = operands_add(&o, &s->args[i], dt, err))) {
            goto fail;
        }
    }
    if ((st = alloc_out(s, &spec, &out, err)))
        goto fail;
    return run_and_return(s, out, &o, loop, &c, err);
fail:
    operands_release(&o);
    return st;
}
