/* layer_norm.c — CPU native_layer_norm.
 *
 * Invariants:
 *  - The shape function (kernels/shape_reduce.c) validates everything first;
 *    the three outputs come from od_alloc_outputs_overwrite and every element
 *    is written. float32 and bfloat16 compute in float, float64 and float16
 *    in double (float16 has no CPU kernel in torch 1.13: it computes as
 *    float64).
 *  - Replays ATen's CPU kernel step for step, because its rounding is
 *    visible: a constant row gives fma residues (-8e-11, not 0), eps = 0 on
 *    a constant row gives NaN, and where inf - inf meets in the moments
 *    decides between an infinite mean, a NaN mean and a NaN or zero rstd.
 *  - Moments: RowwiseMoments, Welford per AVX2 lane (4 doubles, 8 floats;
 *    bfloat16 loads 16 and accumulates them in float as two halves of 8)
 *    over chunks of 16 vectors, the chunks cascaded pairwise, then a scalar
 *    Welford over the tail and the lanes merged one by one.
 *  - rstd = 1 / sqrt(var + eps) in the compute type; out =
 *    (x * rstd + (-rstd * mean)) * w + b, w = 1 and b = 0 when absent. A
 *    float32 output of OD_CPU_STREAM_BYTES or more is written with streaming
 *    stores on AVX-512 hosts, with the same bits.
 *  - Which steps are fmas is torch's build's choice, so each is explicit.
 *    float32 and float64 moments have none: mean, rstd and output equal
 *    torch 1.13's bit for bit that way (rows of 1 to 17031 elements, with
 *    and without weight and bias, offsets of 300 and scales of 1e18; with
 *    fmas in the Welford and merge steps a quarter to half of such rows had
 *    a mean one ulp off). The apply pass is two fmas; bfloat16's moments
 *    keep the fmas they had (its rows are not matched to torch's bits), and
 *    its scalar apply loop has none (see ln_apply_bf16).
 */
/* No fp-contract here (unlike softmax.c): which steps are FMAs is torch's
 * choice, made explicit with fma() where its build contracts (and
 * LN_PLAIN_FMA, a * b + c, where it does not). The other
 * options are softmax.c's (this was its second half): trapping math off so
 * gcc if-converts the selects, the dynamic cost model so it vectorises loops
 * of unknown trip count. Before every include, for the inline math. */
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

#define LN_GRAIN 16384 /* elements of work per parallel task, at least */

#define LN_CHUNK 16
#define LN_GROUP 4 /* chunks whose Welford chains run interleaved */
#define LN_WIDE 16 /* float32 chunks the AVX-512 path runs at once */

#define LN_PLAIN_ADD(a, b) ((a) + (b))
#define LN_PLAIN_SUB(a, b) ((a) - (b))
#define LN_PLAIN_MUL(a, b) ((a) * (b))
#define LN_PLAIN_DIV(a, b) ((a) / (b))
#define LN_PLAIN_FMA(a, b, c) ((a) * (b) + (c))

/* AddMoments: merge (m0a, a1, a2) into (m0, b1, b2). */
#define LN_ADD_MOMENTS(T, ADD, SUB, MUL, DIV, FMA, CVT, m0a, a1, a2, m0, b1, b2)                     \
    do {                                                                                             \
        int64_t t_ = (m0) + (m0a);                                                                   \
        T c_ = t_ == 0 ? (T)0 : DIV(CVT(m0a), CVT(t_));                                              \
        T d_ = SUB(a1, b1);                                                                          \
        (b1) = FMA(c_, d_, b1);                                                                      \
        (b2) = ADD(b2, FMA(MUL(MUL(d_, d_), c_), CVT(m0), a2));                                      \
        (m0) = t_;                                                                                   \
    } while (0)

/* Welford over chunks i .. i + G - 1 (m0 vectors each) into v1, v2 [G][H][L]. */
#define LN_CHUNKS_(T, L, H, ADD, SUB, MUL, DIV, FMA, CVT, G, M0)                                     \
    do {                                                                                             \
    for (int64_t j = 0; j < (M0); j++) {                                                             \
        T c = DIV((T)1, CVT(j + 1));                                                                 \
        _Pragma("GCC unroll 4")                                                                      \
        for (int q = 0; q < (G); q++) {                                                              \
            const T *xp = x + ((i + q) * LN_CHUNK + j) * L * H;                                      \
            for (int h = 0; h < H; h++)                                                              \
                for (int l = 0; l < L; l++) {                                                        \
                    T xv = xp[h * L + l];                                                            \
                    T d = SUB(xv, v1[q][h][l]);                                                      \
                    v1[q][h][l] = ADD(MUL(d, c), v1[q][h][l]); /* torch: no fma here */              \
                    v2[q][h][l] = FMA(d, SUB(xv, v1[q][h][l]), v2[q][h][l]);                         \
                }                                                                                    \
        }                                                                                            \
    }                                                                                                \
    } while (0)

/* float32 Welford over LN_WIDE full chunks, x at the first one's first
 * vector, into v1, v2: LN_CHUNKS_'s operations lane for lane (so the same
 * bits), two chunks to a zmm, eight chains in flight. Each chain is a
 * sub -> mul -> add loop, so the four ymm chains of LN_CHUNKS_ were bound by
 * its latency: 8 rows of 4096 in L2, one thread, the moments went from
 * 0.119 to 0.082 ns per element. */
__attribute__((target("avx512f"))) static void ln_chunks_wide_f32_512(const float *x, float v1[][1][8],
                                                                      float v2[][1][8])
{
    __m512 a1[LN_WIDE / 2], a2[LN_WIDE / 2];
#pragma GCC unroll 8
    for (int p = 0; p < LN_WIDE / 2; p++)
        a1[p] = a2[p] = _mm512_setzero_ps();
    for (int j = 0; j < LN_CHUNK; j++) {
        __m512 c = _mm512_set1_ps(1.0f / (float)(j + 1));
#pragma GCC unroll 8
        for (int p = 0; p < LN_WIDE / 2; p++) {
            const float *xp = x + ((2 * p) * LN_CHUNK + j) * 8; /* chunk 2p's vector j; 2p + 1's follows */
            __m512d lo = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(xp)));
            __m512 xv = _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(_mm256_loadu_ps(xp + LN_CHUNK * 8)), 1));
            __m512 d = _mm512_sub_ps(xv, a1[p]);
            a1[p] = _mm512_add_ps(_mm512_mul_ps(d, c), a1[p]); /* torch: no fma here */
            a2[p] = _mm512_add_ps(_mm512_mul_ps(d, _mm512_sub_ps(xv, a1[p])), a2[p]); /* LN_PLAIN_FMA */
        }
    }
#pragma GCC unroll 8
    for (int p = 0; p < LN_WIDE / 2; p++) { /* v1[2p] and v1[2p + 1] are adjacent: one store */
        _mm512_storeu_ps(&v1[2 * p][0][0], a1[p]);
        _mm512_storeu_ps(&v2[2 * p][0][0], a2[p]);
    }
}
#define LN_WIDE_F32(x, v1, v2) (__builtin_cpu_supports("avx512f") && (ln_chunks_wide_f32_512(x, v1, v2), true))
#define LN_NO_WIDE(x, v1, v2) false

#define LN_ATEN_MOMENTS(NAME, T, L, H, ADD, SUB, MUL, DIV, FMA, CVT, WIDE)                                    \
    OD_CPU_CLONES static void NAME(const T *x, int64_t N, T *mean, T *var)                           \
    {                                                                                                \
        int64_t n = N / (L * H), m = (n + LN_CHUNK - 1) / LN_CHUNK, depth = 1;                       \
        while (((int64_t)1 << depth) < m)                                                            \
            depth++;                                                                                 \
        int64_t s0[64];                                                                              \
        T s1[64][L], s2[64][L];                                                                      \
        /* only the cascade's depth levels are used: short rows clear little */                      \
        memset(s0, 0, sizeof s0[0] * (size_t)depth);                                                 \
        memset(s1, 0, sizeof s1[0] * (size_t)depth);                                                 \
        memset(s2, 0, sizeof s2[0] * (size_t)depth);                                                 \
        for (int64_t i = 0; i < m;) {                                                                \
            /* up to LN_GROUP full chunks at once: their Welford chains are                         \
             * independent (fresh accumulators), so they overlap; the merges                        \
             * below stay in ATen's order, so the result is unchanged */                              \
            int g = 1;                                                                               \
            int64_t m0 = n - i * LN_CHUNK < LN_CHUNK ? n - i * LN_CHUNK : LN_CHUNK;                  \
            T v1[LN_WIDE][H][L], v2[LN_WIDE][H][L];                                                  \
            if ((i + LN_WIDE) * LN_CHUNK <= n && WIDE(x + i * LN_CHUNK * L * H, v1, v2)) {           \
                g = LN_WIDE;                                                                         \
            } else {                                                                                 \
                while (g < LN_GROUP && (i + g + 1) * LN_CHUNK <= n && (i + 1) * LN_CHUNK <= n)        \
                    g++;                                                                             \
                for (int q = 0; q < g; q++)                                                          \
                    for (int h = 0; h < H; h++)                                                      \
                        for (int l = 0; l < L; l++)                                                  \
                            v1[q][h][l] = v2[q][h][l] = 0;                                           \
                if (g == LN_GROUP) /* a constant count: gcc keeps the accumulators in registers */ \
                    LN_CHUNKS_(T, L, H, ADD, SUB, MUL, DIV, FMA, CVT, LN_GROUP, LN_CHUNK);           \
                else                                                                                 \
                    LN_CHUNKS_(T, L, H, ADD, SUB, MUL, DIV, FMA, CVT, g, m0);                        \
            }                                                                                        \
            for (int q = 0; q < g; q++, i++) {                                                       \
                int64_t k0 = s0[0];                                                                  \
                for (int h = 0; h < H; h++) {                                                        \
                    for (int l = 0; l < L; l++) {                                                    \
                        k0 = s0[0];                                                                  \
                        LN_ADD_MOMENTS(T, ADD, SUB, MUL, DIV, FMA, CVT, m0, v1[q][h][l], v2[q][h][l], \
                                       k0, s1[0][l], s2[0][l]);                                      \
                    }                                                                                \
                    s0[0] = k0;                                                                      \
                }                                                                                    \
                int64_t mask = i + 1;                                                                \
                for (int64_t j = 1; j < depth && (mask & 1) == 0; j++) {                             \
                    int64_t kj = s0[j];                                                              \
                    for (int l = 0; l < L; l++) {                                                    \
                        kj = s0[j];                                                                  \
                        LN_ADD_MOMENTS(T, ADD, SUB, MUL, DIV, FMA, CVT, s0[j - 1], s1[j - 1][l],     \
                                       s2[j - 1][l], kj, s1[j][l], s2[j][l]);                        \
                        s1[j - 1][l] = s2[j - 1][l] = 0;                                             \
                    }                                                                                \
                    s0[j] = kj;                                                                      \
                    s0[j - 1] = 0;                                                                   \
                    mask >>= 1;                                                                      \
                }                                                                                    \
            }                                                                                        \
        }                                                                                            \
        for (int64_t i = 1; i < depth; i++) {                                                        \
            int64_t k0 = s0[0];                                                                      \
            for (int l = 0; l < L; l++) {                                                            \
                k0 = s0[0];                                                                          \
                LN_ADD_MOMENTS(T, ADD, SUB, MUL, DIV, FMA, CVT, s0[i], s1[i][l], s2[i][l], k0,       \
                               s1[0][l], s2[0][l]);                                                  \
            }                                                                                        \
            s0[0] = k0;                                                                              \
        }                                                                                            \
        int64_t k = 0;                                                                               \
        T m1 = 0, m2 = 0;                                                                            \
        for (int64_t i = n * L * H; i < N; i++) {                                                    \
            T d = SUB(x[i], m1);                                                                     \
            ++k;                                                                                     \
            m1 = ADD(m1, DIV(d, CVT(k)));                                                            \
            m2 = FMA(d, SUB(x[i], m1), m2);                                                          \
        }                                                                                            \
        for (int l = 0; l < L; l++)                                                                  \
            LN_ADD_MOMENTS(T, ADD, SUB, MUL, DIV, FMA, CVT, n * H, s1[0][l], s2[0][l], k, m1, m2);   \
        *mean = m1;                                                                                  \
        *var = DIV(m2, CVT(N));                                                                      \
    }
#define LN_CVT_D(k) ((double)(k))
#define LN_CVT_F(k) ((float)(k))
LN_ATEN_MOMENTS(ln_moments_f64, double, 4, 1, LN_PLAIN_ADD, LN_PLAIN_SUB, LN_PLAIN_MUL, LN_PLAIN_DIV, LN_PLAIN_FMA,
                LN_CVT_D, LN_NO_WIDE)
LN_ATEN_MOMENTS(ln_moments_f32, float, 8, 1, LN_PLAIN_ADD, LN_PLAIN_SUB, LN_PLAIN_MUL, LN_PLAIN_DIV, LN_PLAIN_FMA,
                LN_CVT_F, LN_WIDE_F32)
/* bfloat16 loads 16 values and accumulates them in float as two halves of 8. */
LN_ATEN_MOMENTS(ln_moments_bf16, float, 8, 2, LN_PLAIN_ADD, LN_PLAIN_SUB, LN_PLAIN_MUL, LN_PLAIN_DIV, fmaf,
                LN_CVT_F, LN_NO_WIDE)
/* Where those float moments overflow, torch 1.13's bfloat16 mean and
 * variance are what c10::BFloat16 arithmetic gives (16 lanes, every result
 * rounded to bfloat16, so a huge value's cancellation is lost and inf * 0
 * appears where the lanes merge): measured against torch, row by row. */
static inline float bf_add(float a, float b) { return od_bf16_round(a + b); }
static inline float bf_sub(float a, float b) { return od_bf16_round(a - b); }
static inline float bf_mul(float a, float b) { return od_bf16_round(a * b); }
static inline float bf_div(float a, float b) { return od_bf16_round(a / b); }
static inline float bf_fma(float a, float b, float c) { return bf_add(bf_mul(a, b), c); }
#define LN_CVT_BF(k) od_bf16_round((float)(k))
LN_ATEN_MOMENTS(ln_moments_bf16_overflow, float, 16, 1, bf_add, bf_sub, bf_mul, bf_div, bf_fma, LN_CVT_BF,
                LN_NO_WIDE)

typedef enum { LN_F64, LN_F32, LN_BF16 } ln_kind;

/* RowwiseMoments for other kernels of this folder (group norm's rows). */
void od_cpu_row_moments(int kind, const void *x, int64_t n, double *mean, double *var)
{
    if (kind == OD_ROW_MOMENTS_F64) {
        ln_moments_f64(x, n, mean, var);
        return;
    }
    float mu, v;
    if (kind == OD_ROW_MOMENTS_F32)
        ln_moments_f32(x, n, &mu, &v);
    else if (kind == OD_ROW_MOMENTS_BF16_ARITH)
        ln_moments_bf16_overflow(x, n, &mu, &v);
    else {
        ln_moments_bf16(x, n, &mu, &v);
        if (!isfinite(mu) || !isfinite(v))
            ln_moments_bf16_overflow(x, n, &mu, &v);
    }
    *mean = mu;
    *var = v;
}

typedef struct ln_ctx {
    const char *x, *w, *b; /* w, b NULL when absent; bfloat16 data is read as float */
    char *y, *mean, *rstd;
    ln_kind kind;
    int64_t N;
    double eps;
    bool stream; /* float32 output of OD_CPU_STREAM_BYTES or more, AVX-512: ln_apply_f32_stream_512 */
} ln_ctx;

/* The apply loops, once per presence of w and b (LN_WB_CASES). Written
 * `w ? w[i] : 1`, gcc vectorised them as masked loads from w, and a masked
 * load from a NULL w, every lane masked off, costs a microcode assist: rows
 * of 8 floats without weight or bias took 100 ns each (1M rows in 104 ms,
 * torch 27 ms). LOOP(WV, BV) gets the two element expressions. */
#define LN_W_(i) w[i]
#define LN_B_(i) b[i]
#define LN_ONE_(i) 1
#define LN_ZERO_(i) 0
#define LN_WB_CASES(LOOP)                                                                            \
    do {                                                                                             \
        if (w && b)                                                                                  \
            LOOP(LN_W_, LN_B_);                                                                      \
        else if (w)                                                                                  \
            LOOP(LN_W_, LN_ZERO_);                                                                   \
        else if (b)                                                                                  \
            LOOP(LN_ONE_, LN_B_);                                                                    \
        else                                                                                         \
            LOOP(LN_ONE_, LN_ZERO_);                                                                 \
    } while (0)

OD_CPU_CLONES static void ln_apply_f64(const double *restrict x, const double *restrict w,
                                       const double *restrict b, double *restrict y, int64_t n,
                                       double scale, double shift)
{
#define LN_APPLY_F64_(WV, BV)                                                                        \
    do {                                                                                             \
        for (int64_t i = 0; i < n; i++)                                                              \
            y[i] = fma(fma(x[i], scale, shift), WV(i), BV(i));                                       \
    } while (0)
    LN_WB_CASES(LN_APPLY_F64_);
#undef LN_APPLY_F64_
}

/* Each 16 elements also ask for the next row's line (x + n, y + n: rows
 * are contiguous, and a prefetch past the end is harmless), so the next
 * row's loads and its output's write-allocates overlap this pass instead of
 * stalling the moments pass: 4096x4096 3.72-3.80 -> 3.16-3.27 ms with the
 * host's memory in its fast state, 4 % less in its slow state (old and new
 * servers in turns). */
#define LN_PREFETCH_NEXT_ROW(x, y, n, i) (OD_CPU_PREFETCH((x) + (i), n, 0), OD_CPU_PREFETCH((y) + (i), n, 1))
OD_CPU_CLONES static void ln_apply_f32(const float *restrict x, const float *restrict w,
                                       const float *restrict b, float *restrict y, int64_t n,
                                       float scale, float shift)
{
#define LN_APPLY_F32_(WV, BV)                                                                        \
    do {                                                                                             \
        int64_t i = 0;                                                                               \
        for (; i + 16 <= n; i += 16) {                                                               \
            LN_PREFETCH_NEXT_ROW(x, y, n, i);                                                        \
            for (int j = 0; j < 16; j++)                                                             \
                y[i + j] = fmaf(fmaf(x[i + j], scale, shift), WV(i + j), BV(i + j));                 \
        }                                                                                            \
        for (; i < n; i++)                                                                           \
            y[i] = fmaf(fmaf(x[i], scale, shift), WV(i), BV(i));                                     \
    } while (0)
    LN_WB_CASES(LN_APPLY_F32_);
#undef LN_APPLY_F32_
}

/* ln_apply_f32 with streaming stores, the same two fmas (the same bits):
 * whole aligned lines of y from its first 64-byte boundary; the elements
 * before it and after the last whole line go through ln_apply_f32. The
 * caller fences (_mm_sfence) before the rows are read. */
__attribute__((target("avx512f"))) static void ln_apply_f32_stream_512(const float *x, const float *w,
                                                                       const float *b, float *y, int64_t n,
                                                                       float scale, float shift)
{
    int64_t i = od_cpu_floats_before_line(y, n);
    ln_apply_f32(x, w, b, y, i, scale, shift);
    __m512 vs = _mm512_set1_ps(scale), vh = _mm512_set1_ps(shift);
    for (; i + 16 <= n; i += 16) {
        OD_CPU_PREFETCH(x + i, n, 0); /* the next row's line, as LN_PREFETCH_NEXT_ROW (y needs none) */
        __m512 t = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), vs, vh);
        __m512 wv = w ? _mm512_loadu_ps(w + i) : _mm512_set1_ps(1.0f);
        __m512 bv = b ? _mm512_loadu_ps(b + i) : _mm512_setzero_ps();
        _mm512_stream_ps(y + i, _mm512_fmadd_ps(t, wv, bv));
    }
    ln_apply_f32(x + i, w ? w + i : NULL, b ? b + i : NULL, y + i, n - i, scale, shift);
}

/* bfloat16: ATen's float loop without fma, except the 16-wide vector blocks
 * of the weight-and-bias path (torch 1.13 rounds a one-element row's
 * x * rstd - rstd * mean to exactly 0 there, an fma would not). */
OD_CPU_CLONES static void ln_apply_bf16(const float *restrict x, const float *restrict w,
                                        const float *restrict b, float *restrict y, int64_t n,
                                        float scale, float shift)
{
    int64_t i0 = 0;
    if (w && b)
        for (; i0 < n - n % 16; i0++)
            y[i0] = fmaf(fmaf(x[i0], scale, shift), w[i0], b[i0]);
#define LN_APPLY_BF16_(WV, BV)                                                                       \
    do {                                                                                             \
        for (int64_t i = i0; i < n; i++) {                                                           \
            float t = x[i] * scale;                                                                  \
            t = t + shift;                                                                           \
            t = t * WV(i);                                                                           \
            y[i] = t + BV(i);                                                                        \
        }                                                                                            \
    } while (0)
    LN_WB_CASES(LN_APPLY_BF16_);
#undef LN_APPLY_BF16_
}

static void ln_rows(void *ctx, int64_t begin, int64_t end)
{
    const ln_ctx *c = ctx;
    int64_t N = c->N;
    for (int64_t r = begin; r < end; r++) {
        if (c->kind == LN_F64) {
            const double *x = (const double *)(const void *)c->x + r * N;
            double mu, var;
            ln_moments_f64(x, N, &mu, &var);
            double rs = 1.0 / sqrt(var + c->eps);
            ln_apply_f64(x, (const double *)(const void *)c->w, (const double *)(const void *)c->b,
                         (double *)(void *)c->y + r * N, N, rs, -rs * mu);
            ((double *)(void *)c->mean)[r] = mu;
            ((double *)(void *)c->rstd)[r] = rs;
        } else {
            const float *x = (const float *)(const void *)c->x + r * N;
            const float *w = (const float *)(const void *)c->w, *b = (const float *)(const void *)c->b;
            float *y = (float *)(void *)c->y + r * N;
            float mu, var;
            if (c->kind == LN_F32)
                ln_moments_f32(x, N, &mu, &var);
            else {
                ln_moments_bf16(x, N, &mu, &var);
                if (!isfinite(mu) || !isfinite(var))
                    ln_moments_bf16_overflow(x, N, &mu, &var);
            }
            float rs = 1.0f / sqrtf(var + (float)c->eps);
            if (c->stream)
                ln_apply_f32_stream_512(x, w, b, y, N, rs, -rs * mu);
            else
                (c->kind == LN_F32 ? ln_apply_f32 : ln_apply_bf16)(x, w, b, y, N, rs, -rs * mu);
            ((float *)(void *)c->mean)[r] = mu;
            ((float *)(void *)c->rstd)[r] = rs;
        }
    }
    if (c->stream)
        _mm_sfence(); /* the streamed rows are visible before the task reports done */
}

od_status od_cpu_layer_norm(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec[3];
    int nouts = 0;
    od_status st = od_shape_layer_norm(id, s, spec, &nouts, err);
    if (st)
        return st;
    od_tensor *input = s->args[0].u.t;
    od_tensor *weight = s->args[2].tag == OD_T_TENSOR ? s->args[2].u.t : NULL;
    od_tensor *bias = s->args[3].tag == OD_T_TENSOR ? s->args[3].u.t : NULL;
    double eps = od_value_as_double(&s->args[4]);
    int axis = input->ndim - (int)s->args[1].u.list.n;
    od_tensor *outs[3] = {NULL, NULL, NULL}, *tg[3] = {NULL, NULL, NULL};
    od_tensor *x = NULL, *w = NULL, *b = NULL;
    /* ln_rows writes every element of the three (no rows: all three are empty) */
    if ((st = od_alloc_outputs_overwrite(s, spec, 3, outs, err)))
        return st;
    /* float16 has no CPU layer norm in torch 1.13: it computes as float64. */
    od_dtype cdt = input->dtype == OD_FLOAT64 || input->dtype == OD_FLOAT16 ? OD_FLOAT64 : OD_FLOAT32;
    int64_t M = 1, N = 1;
    for (int k = 0; k < input->ndim; k++) {
        if (k < axis)
            M *= input->sizes[k];
        else
            N *= input->sizes[k];
    }
    if (M > 0) {
        if ((st = od_cpu_to_dtype(input, cdt, &x, err)) ||
            (weight && (st = od_cpu_to_dtype(weight, cdt, &w, err))) ||
            (bias && (st = od_cpu_to_dtype(bias, cdt, &b, err))))
            goto fail;
        for (int i = 0; i < 3; i++)
            if ((st = od_cpu_compute_target(outs[i], cdt, &tg[i], err)))
                goto fail;
        ln_ctx c = {od_tensor_data(x), w ? od_tensor_data(w) : NULL, b ? od_tensor_data(b) : NULL,
                    od_tensor_data(tg[0]), od_tensor_data(tg[1]), od_tensor_data(tg[2]),
                    cdt == OD_FLOAT64 ? LN_F64 : input->dtype == OD_BFLOAT16 ? LN_BF16 : LN_F32, N, eps, false};
        c.stream = c.kind == LN_F32 && M * N * (int64_t)sizeof(float) >= OD_CPU_STREAM_BYTES &&
                   __builtin_cpu_supports("avx512f");
        if ((st = od_parallel_for(M, LN_GRAIN / (N + 1) + 1, ln_rows, &c)))
            goto fail;
        for (int i = 0; i < 3; i++) {
            st = od_cpu_finish_target(outs[i], tg[i], err);
            tg[i] = NULL;
            if (st)
                goto fail;
        }
    }
    od_tensor_release(x);
    od_tensor_release(w);
    od_tensor_release(b);
    for (int i = 0; i < 3; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = 3;
    return OD_OK;
fail:
    od_tensor_release(x);
    od_tensor_release(w);
    od_tensor_release(b);
    for (int i = 0; i < 3; i++) {
        od_tensor_release(tg[i]);
        od_tensor_release(outs[i]);
    }
    return st;
}
