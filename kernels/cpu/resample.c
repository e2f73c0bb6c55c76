/* resample.c — upsample_nearest1d/2d/3d, upsample_linear1d / bilinear2d /
 * trilinear3d and upsample_bicubic2d (.vec too) and their _backward on the
 * CPU.
 *
 * Invariants: od_resample_plan_of (shape_resample.c) checked everything;
 * source indices and weights come from od_resample.h, shared with the CUDA
 * kernels, tabled once per dim. The input (or grad_output) is read through
 * its strides as [N, C, D, H, W]; the result is new and contiguous. Work is
 * split by plane (N x C) across od_parallel_for; a backward plane
 * accumulates into its own grad_input plane, so planes never race. Linear
 * blends dim by dim, innermost first (ATen's interpolate: t0 * w0 + t1 * w1),
 * in the opmath type (float for float32, double for float64); the
 * forward's float32 / float64 blends are fma(t0, w0, t1 * w1), as gcc
 * contracts ATen's, so they are torch's bits (the direct loop, a fallback
 * without memory for the tables, is unfused). The bfloat16 forwards
 * (linear, bicubic, and nearest's index) replay ATen's scalar_t BFloat16
 * arithmetic instead, every product and sum rounded, for torch's bits.
 * Bicubic tables 4 taps per output index of H and W and sums rows of W
 * taps weighted by the H taps (ATen's Interpolate<2>); its backward
 * accumulates a plane in the opmath type and rounds once, except for the
 * 16-bit types, which ATen's backward computes in the type itself.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

typedef struct rs_ctx {
    const od_resample_plan *pl;
    bool avx512;         /* linear 2d forward: AVX-512 rows */
    const char *x;
    int64_t xs[5];       /* x's strides, N C D H W (D's 0 for 1d/2d, H's too for 1d) */
    char *y;             /* contiguous result */
    const int64_t *i0[3], *i1[3]; /* per dim: source indices of each output index */
    const double *l0[3], *l1[3];  /* weights (linear), in double, rounded to the opmath type */
    const int64_t *cs;   /* nearest 1d/2d backward: output columns cs[iw] .. cs[iw + 1] - 1 read iw */
    bool pairs;          /* ... and they are 2 * iw, 2 * iw + 1, contiguous float32 on AVX-512 */
} rs_ctx;
/* A 1d or 2d operator's leading dims (D; H too for 1d) are placeholders of
 * size 1 -> 1 that ATen's kernel for it does not have: linear kernels never
 * blend them, since x * 1 + x * 0 is NaN, not x, for an infinite x. The
 * operator's own dims are blended whatever their sizes (a 1 -> 1 D of
 * trilinear3d too), zero weights included, as ATen does. */

#define F32_LD(v) (v)
#define BF_LD(v) od_bf16_to_float(v)
#define BF_ST(v) od_float_to_bf16(v)
#define U8_ST(v) (v)

#define RS_FWD(NAME, T, A, LOAD, STORE)                                                                        \
    static void NAME(void *vc, int64_t p0, int64_t p1)                                                         \
    {                                                                                                          \
        const rs_ctx *c = vc;                                                                                  \
        const od_resample_geom *g = &c->pl->g;                                                                 \
        int64_t on = g->out[0] * g->out[1] * g->out[2], C = c->pl->c;                                          \
        bool lin = g->kind == OD_RESAMPLE_LINEAR;                                                              \
        bool hd = c->pl->nd >= 2, dd = c->pl->nd >= 3; /* the operator's own dims (rs_ctx) */                  \
        for (int64_t p = p0; p < p1; p++) {                                                                    \
            const T *x = (const T *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];                            \
            T *y = (T *)c->y + p * on;                                                                         \
            int64_t i = 0;                                                                                     \
            for (int64_t od = 0; od < g->out[0]; od++) {                                                       \
                const T *xd0 = x + c->i0[0][od] * c->xs[2], *xd1 = x + c->i1[0][od] * c->xs[2];                \
                for (int64_t oh = 0; oh < g->out[1]; oh++) {                                                   \
                    int64_t h0 = c->i0[1][oh] * c->xs[3], h1 = c->i1[1][oh] * c->xs[3];                        \
                    for (int64_t ow = 0; ow < g->out[2]; ow++, i++) {                                          \
                        int64_t w0 = c->i0[2][ow] * c->xs[4];                                                  \
                        if (!lin) {                                                                            \
                            y[i] = xd0[h0 + w0];                                                               \
                            continue;                                                                          \
                        }                                                                                      \
                        int64_t w1 = c->i1[2][ow] * c->xs[4];                                                  \
                        A a0 = (A)c->l0[2][ow], a1 = (A)c->l1[2][ow];                                          \
                        A hh0 = (A)c->l0[1][oh], hh1 = (A)c->l1[1][oh];                                        \
                        A t0 = LOAD(xd0[h0 + w0]) * a0 + LOAD(xd0[h0 + w1]) * a1;                              \
                        if (hd)                                                                                \
                            t0 = t0 * hh0 + (LOAD(xd0[h1 + w0]) * a0 + LOAD(xd0[h1 + w1]) * a1) * hh1;         \
                        if (!dd) {                                                                             \
                            y[i] = STORE(t0);                                                                  \
                            continue;                                                                          \
                        }                                                                                      \
                        A t1 = (LOAD(xd1[h0 + w0]) * a0 + LOAD(xd1[h0 + w1]) * a1) * hh0 +                     \
                               (LOAD(xd1[h1 + w0]) * a0 + LOAD(xd1[h1 + w1]) * a1) * hh1;                     \
                        y[i] = STORE(t0 * (A)c->l0[0][od] + t1 * (A)c->l1[0][od]);                             \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }

RS_FWD(fwd_f32, float, float, F32_LD, F32_LD)
RS_FWD(fwd_f64, double, double, F32_LD, F32_LD)
RS_FWD(fwd_bf16, uint16_t, float, BF_LD, BF_ST)
RS_FWD(fwd_u8, uint8_t, float, F32_LD, U8_ST) /* nearest only: a copy */

/* ---- linear 1d / 2d forward, separably: each source row the output needs
 * is blended along W once (the direct formula's inner term, x[w0] * a0 +
 * x[w1] * a1) into a two-row cache (source rows never decrease with oh),
 * then each output row is its two cached rows times their H weights: the
 * direct formula's operations in its order, float32 and float64 fused as
 * ATen's build fuses them (t0 * w0 + t1 * w1 -> fma(t0, w0, t1 * w1): the
 * unfused sums differed from torch in about one element in three). A W
 * blend runs once per source row, not once per output row, and the loops
 * run over flat arrays, which AVX-512 takes 16 at a time for float32 (the
 * W taps gathered through int32 offsets). ---- */
typedef struct lin2_tab {
    int64_t OW;
    void *a0, *a1;       /* W weights in the opmath type */
    int32_t *o0, *o1;    /* W source offsets (index x stride) when they fit in int32, else NULL */
    void *row[2];        /* the cached blended rows and their source rows */
    int64_t have[2];
    bool avx512;         /* the CPU has AVX-512 (od_cpu_resample asked once per call) */
    void *mem;
} lin2_tab;

/* the tables of one task; false without memory (the direct loop runs) */
static bool lin2_tab_init(lin2_tab *t, const rs_ctx *c, size_t asz)
{
    int64_t OW = c->pl->g.out[2], xs = c->xs[4], IW = c->pl->g.in[2];
    bool fit = IW * (xs < 0 ? -xs : xs) < INT32_MAX;
    char *m = malloc((asz * 4 + (fit ? 2 * sizeof(int32_t) : 0)) * (size_t)OW + 1);
    if (!m)
        return false;
    t->OW = OW;
    t->mem = m;
    t->a0 = m;
    t->a1 = m + asz * (size_t)OW;
    t->row[0] = m + 2 * asz * (size_t)OW;
    t->row[1] = m + 3 * asz * (size_t)OW;
    t->o0 = fit ? (int32_t *)(m + 4 * asz * (size_t)OW) : NULL;
    t->o1 = fit ? t->o0 + OW : NULL;
    for (int64_t ow = 0; fit && ow < OW; ow++) {
        t->o0[ow] = (int32_t)(c->i0[2][ow] * xs);
        t->o1[ow] = (int32_t)(c->i1[2][ow] * xs);
    }
    t->have[0] = t->have[1] = -1;
    t->avx512 = c->avx512;
    return true;
}

/* the cache slot for source row r, keeping slot `keep` (-1: none); *fresh
 * says the caller must fill it */
static int lin2_slot(lin2_tab *t, int64_t r, int keep, bool *fresh)
{
    *fresh = false;
    if (t->have[0] == r)
        return 0;
    if (t->have[1] == r)
        return 1;
    int k = keep == 0 ? 1 : 0;
    t->have[k] = r;
    *fresh = true;
    return k;
}

/* the W weights of the linear forwards, in the opmath type A, into a0 / a1 */
#define W_WEIGHTS_(A, c, OW, a0, a1)                    \
    for (int64_t ow_ = 0; ow_ < (OW); ow_++) {          \
        (a0)[ow_] = (A)(c)->l0[2][ow_];                 \
        (a1)[ow_] = (A)(c)->l1[2][ow_];                 \
    }

#define LIN2_FWD(NAME, DIRECT, T, A, LOAD, STORE, HROW, VROW, FMA)                                             \
    OD_CPU_CLONES static void NAME(void *vc, int64_t p0, int64_t p1)                                           \
    {                                                                                                          \
        const rs_ctx *c = vc;                                                                                  \
        const od_resample_geom *g = &c->pl->g;                                                                 \
        int64_t OH = g->out[1], OW = g->out[2], C = c->pl->c, xw = c->xs[4];                                   \
        lin2_tab t;                                                                                            \
        if (!lin2_tab_init(&t, c, sizeof(A))) {                                                                \
            DIRECT(vc, p0, p1);                                                                                \
            return;                                                                                            \
        }                                                                                                      \
        A *a0 = t.a0, *a1 = t.a1;                                                                              \
        W_WEIGHTS_(A, c, OW, a0, a1);                                                                          \
        for (int64_t p = p0; p < p1; p++) {                                                                    \
            const T *x = (const T *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];                            \
            T *y = (T *)c->y + p * OH * OW;                                                                    \
            t.have[0] = t.have[1] = -1;                                                                        \
            for (int64_t oh = 0; oh < OH; oh++) {                                                              \
                int s[2] = {-1, -1};                                                                           \
                for (int k = 0; k < 2; k++) {                                                                  \
                    int64_t r = (k ? c->i1[1] : c->i0[1])[oh];                                                 \
                    bool fresh;                                                                                \
                    s[k] = lin2_slot(&t, r, k ? s[0] : -1, &fresh);                                            \
                    if (!fresh)                                                                                \
                        continue;                                                                              \
                    const T *row = x + r * c->xs[3];                                                           \
                    A *h = t.row[s[k]];                                                                        \
                    if (!HROW(&t, row, h))                                                                     \
                        for (int64_t ow = 0; ow < OW; ow++)                                                    \
                            h[ow] = FMA(LOAD(row[c->i0[2][ow] * xw]), a0[ow], LOAD(row[c->i1[2][ow] * xw]) * a1[ow]); \
                }                                                                                              \
                const A *h0 = t.row[s[0]], *h1 = t.row[s[1]];                                                  \
                A w0 = (A)c->l0[1][oh], w1 = (A)c->l1[1][oh];                                                  \
                T *yr = y + oh * OW;                                                                           \
                if (c->pl->nd < 2) /* 1d: H is a placeholder, never blended */                                 \
                    for (int64_t ow = 0; ow < OW; ow++)                                                        \
                        yr[ow] = STORE(h0[ow]);                                                                \
                else if (!VROW(&t, h0, h1, w0, w1, yr, OW))                                                    \
                    for (int64_t ow = 0; ow < OW; ow++)                                                        \
                        yr[ow] = STORE(FMA(h0[ow], w0, h1[ow] * w1));                                          \
            }                                                                                                  \
        }                                                                                                      \
        free(t.mem);                                                                                           \
    }

/* ---- nearest 1d / 2d forward: a copy, row by row. An output row whose
 * source row is the previous output row's (every other row at 2x) is that
 * row copied whole; a new one reads through a table of W source offsets. */
#define NEAR2_ROW(T)                                                                                           \
    do {                                                                                                       \
        const T *xr_ = (const T *)xr;                                                                          \
        T *yr_ = (T *)yr;                                                                                      \
        for (int64_t ow = 0; ow < OW; ow++)                                                                    \
            yr_[ow] = xr_[off[ow]];                                                                            \
    } while (0)

static void near2_fwd(void *vc, int64_t p0, int64_t p1)
{
    const rs_ctx *c = vc;
    const od_resample_geom *g = &c->pl->g;
    int64_t OH = g->out[1], OW = g->out[2], C = c->pl->c;
    size_t esz = od_dtype_size(c->pl->x->dtype);
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(OW > 0 ? OW : 1));
    if (!off) {
        (esz == 8 ? fwd_f64 : esz == 4 ? fwd_f32 : esz == 2 ? fwd_bf16 : fwd_u8)(vc, p0, p1);
        return;
    }
    for (int64_t ow = 0; ow < OW; ow++)
        off[ow] = c->i0[2][ow] * c->xs[4];
    for (int64_t p = p0; p < p1; p++) {
        const char *x = c->x + ((p / C) * c->xs[0] + (p % C) * c->xs[1]) * (int64_t)esz;
        char *y = c->y + p * OH * OW * (int64_t)esz;
        for (int64_t oh = 0; oh < OH; oh++) {
            char *yr = y + oh * OW * (int64_t)esz;
            if (oh > 0 && c->i0[1][oh] == c->i0[1][oh - 1]) {
                memcpy(yr, yr - OW * (int64_t)esz, (size_t)OW * esz);
                continue;
            }
            const char *xr = x + c->i0[1][oh] * c->xs[3] * (int64_t)esz;
            switch (esz) {
            case 8: NEAR2_ROW(uint64_t); break;
            case 4: NEAR2_ROW(uint32_t); break;
            case 2: NEAR2_ROW(uint16_t); break;
            default: NEAR2_ROW(uint8_t); break;
            }
        }
    }
    free(off);
}

/* float32 rows 16 at a time; false where the CPU lacks AVX-512 or the
 * offsets did not fit (the plain loops run) */

__attribute__((target("avx512f"))) static void hrow_f32_512(const lin2_tab *t, const float *row, float *h)
{
    const float *a0 = t->a0, *a1 = t->a1;
    for (int64_t ow = 0; ow < t->OW; ow += 16) {
        __mmask16 m = t->OW - ow >= 16 ? 0xffff : (__mmask16)((1u << (t->OW - ow)) - 1);
        __m512i j0 = _mm512_maskz_loadu_epi32(m, t->o0 + ow), j1 = _mm512_maskz_loadu_epi32(m, t->o1 + ow);
        __m512 v0 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, j0, row, 4);
        __m512 v1 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, j1, row, 4);
        __m512 r = _mm512_fmadd_ps(v0, _mm512_maskz_loadu_ps(m, a0 + ow),
                                   _mm512_mul_ps(v1, _mm512_maskz_loadu_ps(m, a1 + ow)));
        _mm512_mask_storeu_ps(h + ow, m, r);
    }
}

__attribute__((target("avx512f"))) static void vrow_f32_512(const float *h0, const float *h1, float w0, float w1,
                                                             float *y, int64_t n)
{
    __m512 b0 = _mm512_set1_ps(w0), b1 = _mm512_set1_ps(w1);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, h0 + i), b0,
                                   _mm512_mul_ps(_mm512_maskz_loadu_ps(m, h1 + i), b1));
        _mm512_mask_storeu_ps(y + i, m, r);
    }
}

static inline bool hrow_f32(const lin2_tab *t, const float *row, float *h)
{
    if (!t->avx512 || !t->o0)
        return false;
    hrow_f32_512(t, row, h);
    return true;
}

static inline bool vrow_f32(const lin2_tab *t, const float *h0, const float *h1, float w0, float w1, float *y,
                            int64_t n)
{
    if (!t->avx512)
        return false;
    vrow_f32_512(h0, h1, w0, w1, y, n);
    return true;
}

#define NO_HROW(t, row, h) ((void)(t), (void)(row), (void)(h), false)
#define NO_VROW(t, h0, h1, w0, w1, y, n) ((void)(t), (void)(h0), (void)(h1), (void)(w0), (void)(w1), (void)(y), (void)(n), false)
/* float32 and float64 fuse as ATen's build does (see TRI_FWD below) */
LIN2_FWD(lin2_f32, fwd_f32, float, float, F32_LD, F32_LD, hrow_f32, vrow_f32, fmaf)
LIN2_FWD(lin2_f64, fwd_f64, double, double, F32_LD, F32_LD, NO_HROW, NO_VROW, fma)

/* ---- trilinear forward, separably: each source row of a plane blended
 * along W once (hr: ID x IH rows of OW), then each output element from the
 * four rows its (D, H) taps name: ATen's Interpolate's operations in its
 * order (W taps, then H, then D), fused for float32 / float64 as below. A W
 * blend runs once per source row, not four times per output element
 * (2x16x16x28x28 to twice its size took 3.8 ms, torch 3.1). Without memory
 * for hr the direct loop (unfused) runs. ---- */
#define TRI_FWD(NAME, DIRECT, T, A, LOAD, STORE)                                                              \
    OD_CPU_CLONES static void NAME(void *vc, int64_t p0, int64_t p1)                                           \
    {                                                                                                          \
        const rs_ctx *c = vc;                                                                                  \
        const od_resample_geom *g = &c->pl->g;                                                                 \
        int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], ID = g->in[0], IH = g->in[1];                  \
        int64_t C = c->pl->c, xw = c->xs[4];                                                                   \
        A *hr = malloc(sizeof(A) * (size_t)(ID * IH * OW + 2 * OW) + 1);                                       \
        if (!hr) {                                                                                             \
            DIRECT(vc, p0, p1);                                                                                \
            return;                                                                                            \
        }                                                                                                      \
        A *a0 = hr + ID * IH * OW, *a1 = a0 + OW;                                                              \
        W_WEIGHTS_(A, c, OW, a0, a1);                                                                          \
        for (int64_t p = p0; p < p1; p++) {                                                                    \
            const T *x = (const T *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];                            \
            T *y = (T *)c->y + p * OD * OH * OW;                                                               \
            for (int64_t r = 0; r < ID * IH; r++) {                                                            \
                const T *row = x + (r / IH) * c->xs[2] + (r % IH) * c->xs[3];                                  \
                A *h = hr + r * OW;                                                                            \
                for (int64_t ow = 0; ow < OW; ow++)                                                            \
                    h[ow] = FMA_(LOAD(row[c->i0[2][ow] * xw]), a0[ow], LOAD(row[c->i1[2][ow] * xw]) * a1[ow]); \
            }                                                                                                  \
            for (int64_t od = 0; od < OD; od++) {                                                              \
                A d0 = (A)c->l0[0][od], d1 = (A)c->l1[0][od];                                                  \
                const A *q0 = hr + c->i0[0][od] * IH * OW, *q1 = hr + c->i1[0][od] * IH * OW;                  \
                for (int64_t oh = 0; oh < OH; oh++) {                                                          \
                    A w0 = (A)c->l0[1][oh], w1 = (A)c->l1[1][oh];                                              \
                    int64_t h0 = c->i0[1][oh] * OW, h1 = c->i1[1][oh] * OW;                                    \
                    T *yr = y + (od * OH + oh) * OW;                                                           \
                    for (int64_t ow = 0; ow < OW; ow++) {                                                      \
                        A t0 = FMA_(q0[h0 + ow], w0, q0[h1 + ow] * w1);                                        \
                        A t1 = FMA_(q1[h0 + ow], w0, q1[h1 + ow] * w1);                                        \
                        yr[ow] = STORE(FMA_(t0, d0, t1 * d1));                                                 \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        free(hr);                                                                                              \
    }
/* float32 and float64 fuse as ATen's build does: gcc contracts its
 * Interpolate's t0 * w0 + t1 * w1 into fma(t0, w0, t1 * w1), so these are
 * torch's bits (unfused, 1 in 3 elements differed in the last place) */
#define FMA_ fmaf
TRI_FWD(tri_f32, fwd_f32, float, float, F32_LD, F32_LD)
#undef FMA_
#define FMA_ fma
TRI_FWD(tri_f64, fwd_f64, double, double, F32_LD, F32_LD)
#undef FMA_

/* ATen 1.13's area_pixel_compute_scale<BFloat16>, as a float: a BFloat16
 * quotient of BFloat16 sizes (257 / 271 is 256 / 272), or an explicit
 * scale's reciprocal rounded. */
static float bf16_scale(const od_resample_geom *g, int d)
{
    int64_t in = g->in[d], out = g->out[d];
    if (g->align_corners)
        return out > 1 ? od_bf16_round(od_bf16_round((float)(in - 1)) / od_bf16_round((float)(out - 1))) : 0;
    if (g->has_scale[d] && g->scale[d] > 0)
        return od_bf16_round((float)(1.0 / g->scale[d]));
    return od_bf16_round(od_bf16_round((float)in) / od_bf16_round((float)out));
}

/* The source index of output o from that scale, in float (the kernels'
 * opmath type): scale * o, or scale * (o + 0.5) - 0.5 (exact in double, so
 * rounded once), not clamped. */
static float bf16_source_index(const od_resample_geom *g, int d, int64_t o)
{
    float scale = bf16_scale(g, d);
    return g->align_corners ? scale * (float)o : (float)((double)scale * ((double)o + 0.5) - 0.5);
}

/* bfloat16's linear taps as ATen 1.13's CPU kernel makes them (scalar_t
 * BFloat16, opmath float): the source index from bf16_scale, lambda1
 * rounded to bfloat16 and lambda0 = 1 - lambda1 rounded again. */
static void linear_taps_bf16(const od_resample_geom *g, int d, int64_t o, int64_t *i0, int64_t *i1, double *l0,
                             double *l1)
{
    int64_t in = g->in[d], out = g->out[d];
    if (in == out) { /* ATen's "scale_factor = 1, simply copy" */
        *i0 = *i1 = o;
        *l0 = 1;
        *l1 = 0;
        return;
    }
    float real = bf16_source_index(g, d, o);
    if (real < 0) /* linear's index is clamped at 0, cubic's not */
        real = 0;
    int64_t i = (int64_t)real;
    if (i > in - 1)
        i = in - 1;
    float lam = real - (float)i;
    lam = od_bf16_round(lam < 0 ? 0 : lam > 1 ? 1 : lam);
    *i0 = i;
    *i1 = i + (i < in - 1 ? 1 : 0);
    *l1 = lam;
    *l0 = od_bf16_round(1.0f - lam);
}

/* bfloat16's nearest forward index where ATen 1.13 runs its generic
 * kernel (scalar_t BFloat16): bf16_scale (13 -> 40: 0.32421875, not
 * 0.325) times o in float, floored. A
 * 2d / 3d input that is also channels-last contiguous (one channel, say)
 * takes ATen's channels-last kernel instead, whose nearest_idx scale is a
 * float, as od_resample_nearest_fwd_f32's. */
static int64_t nearest_fwd_bf16(const od_resample_geom *g, int d, int64_t o)
{
    int64_t i = (int64_t)floorf(bf16_scale(g, d) * (float)o);
    return i < g->in[d] - 1 ? i : g->in[d] - 1;
}

/* bfloat16 linear forward (1d, 2d, 3d) in bfloat16 steps, as ATen's
 * Interpolate with scalar_t BFloat16 runs it: t0 * w0 + t1 * w1 is
 * R(R(t0 * w0) + R(t1 * w1)), each product and sum rounded, W inside H
 * inside D. (Blending in float and rounding once, as before, differed from
 * torch in 9 outputs in 10, by up to 0.36 on values near 9.) A plane's
 * source rows are blended along W once each (hr, IH x OW), as the
 * direct formula would blend them for every output row: the same steps. */
#define BLEND_BF_(t0, t1, w0, w1) od_bf16_round(od_bf16_round((t0) * (w0)) + od_bf16_round((t1) * (w1)))
OD_CPU_CLONES static void lin_fwd_bf16(void *vc, int64_t p0, int64_t p1)
{
    const rs_ctx *c = vc;
    const od_resample_geom *g = &c->pl->g;
    int64_t OD = g->out[0], OH = g->out[1], OW = g->out[2], IH = g->in[1], C = c->pl->c;
    bool hd = c->pl->nd >= 2, dd = c->pl->nd >= 3; /* the operator's own dims (rs_ctx) */
    float *hr = malloc(sizeof(float) * (size_t)((dd ? 2 : 1) * IH * OW + 2 * OW + 1));
    if (!hr) {
        fwd_bf16(vc, p0, p1); /* the float blends: within rounding, not torch's bits */
        return;
    }
    float *a0 = hr + (dd ? 2 : 1) * IH * OW, *a1 = a0 + OW;
    for (int64_t ow = 0; ow < OW; ow++)
        a0[ow] = (float)c->l0[2][ow], a1[ow] = (float)c->l1[2][ow];
    for (int64_t p = p0; p < p1; p++) {
        const uint16_t *x = (const uint16_t *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];
        uint16_t *y = (uint16_t *)c->y + p * OD * OH * OW;
        for (int64_t od = 0; od < OD; od++, y += OH * OW) {
            /* the W blends of every source row of the two D slices (one without a D to blend) */
            for (int k = 0; k < (dd ? 2 : 1); k++) {
                const uint16_t *xd = x + (k ? c->i1[0][od] : c->i0[0][od]) * c->xs[2];
                for (int64_t r = 0; r < IH; r++) {
                    const uint16_t *row = xd + r * c->xs[3];
                    float *h = hr + (k * IH + r) * OW;
                    for (int64_t ow = 0; ow < OW; ow++)
                        h[ow] = BLEND_BF_(BF_LD(row[c->i0[2][ow] * c->xs[4]]), BF_LD(row[c->i1[2][ow] * c->xs[4]]),
                                          a0[ow], a1[ow]);
                }
            }
            float d0 = (float)c->l0[0][od], d1 = (float)c->l1[0][od];
            for (int64_t oh = 0; oh < OH; oh++) {
                int64_t r0 = hd ? c->i0[1][oh] : 0, r1 = hd ? c->i1[1][oh] : 0;
                float hh0 = (float)c->l0[1][oh], hh1 = (float)c->l1[1][oh];
                const float *u0 = hr + r0 * OW, *u1 = hr + r1 * OW, *v0 = u0 + IH * OW, *v1 = u1 + IH * OW;
                uint16_t *yr = y + oh * OW;
                for (int64_t ow = 0; ow < OW; ow++) {
                    float t = hd ? BLEND_BF_(u0[ow], u1[ow], hh0, hh1) : u0[ow];
                    if (dd)
                        t = BLEND_BF_(t, BLEND_BF_(v0[ow], v1[ow], hh0, hh1), d0, d1);
                    yr[ow] = BF_ST(t);
                }
            }
        }
    }
    free(hr);
}
#undef BLEND_BF_

/* backward: grad_input (zeroed, contiguous) += each grad_output element at
 * its source (nearest) or at the 2^nd blended sources with their weights */
#define RS_BWD(NAME, T, A, LOAD, STORE, RND)                                                                   \
    static void NAME(void *vc, int64_t p0, int64_t p1)                                                         \
    {                                                                                                          \
        const rs_ctx *c = vc;                                                                                  \
        const od_resample_geom *g = &c->pl->g;                                                                 \
        int64_t inn = g->in[0] * g->in[1] * g->in[2], C = c->pl->c;                                            \
        bool lin = g->kind == OD_RESAMPLE_LINEAR;                                                              \
        for (int64_t p = p0; p < p1; p++) {                                                                    \
            const T *go = (const T *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];                           \
            T *gi = (T *)c->y + p * inn;                                                                       \
            for (int64_t od = 0; od < g->out[0]; od++)                                                         \
                for (int64_t oh = 0; oh < g->out[1]; oh++)                                                     \
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {                                               \
                        A v = LOAD(go[od * c->xs[2] + oh * c->xs[3] + ow * c->xs[4]]);                         \
                        int64_t id[2] = {c->i0[0][od], c->i1[0][od]}, ih[2] = {c->i0[1][oh], c->i1[1][oh]},    \
                                iw[2] = {c->i0[2][ow], c->i1[2][ow]};                                          \
                        if (!lin) {                                                                            \
                            int64_t at = (id[0] * g->in[1] + ih[0]) * g->in[2] + iw[0];                        \
                            gi[at] = STORE(LOAD(gi[at]) + v);                                                  \
                            continue;                                                                          \
                        }                                                                                      \
                        A wd[2] = {(A)c->l0[0][od], (A)c->l1[0][od]}, wh[2] = {(A)c->l0[1][oh], (A)c->l1[1][oh]},\
                          ww[2] = {(A)c->l0[2][ow], (A)c->l1[2][ow]};                                          \
                        /* every tap of the operator's own dims, a zero weight too (0 * inf is NaN in */       \
                        /* ATen's sums); a placeholder dim has one, of weight 1 */                             \
                        for (int a = 0; a < (c->pl->nd >= 3 ? 2 : 1); a++)                                     \
                            for (int b = 0; b < (c->pl->nd >= 2 ? 2 : 1); b++)                                 \
                                for (int e = 0; e < 2; e++) {                                                  \
                                    A w = RND(RND(wd[a] * wh[b]) * ww[e]);                                     \
                                    int64_t at = (id[a] * g->in[1] + ih[b]) * g->in[2] + iw[e];                \
                                    gi[at] = STORE(LOAD(gi[at]) + RND(w * v));                                 \
                                }                                                                              \
                    }                                                                                          \
        }                                                                                                      \
    }

/* RND: bfloat16's linear backward rounds every product, as ATen 1.13's
 * scalar_t BFloat16 loop does (t * h * w * g, each step; its taps are
 * linear_taps_bf16's), so grad_input += is R(gi + R(R(h * w) * g)); the
 * others round nothing (and a placeholder dim's weight 1 changes nothing). */
#define NO_RND_(v) (v)
RS_BWD(bwd_f32, float, float, F32_LD, F32_LD, NO_RND_)
RS_BWD(bwd_f64, double, double, F32_LD, F32_LD, NO_RND_)
RS_BWD(bwd_bf16, uint16_t, float, BF_LD, BF_ST, od_bf16_round)
#undef NO_RND_

/* backward of the 1d and 2d operators (D, and for 1d H, placeholders of
 * one tap of weight 1): the same accumulation into each grad_input element
 * in the same order, with the H and W taps and weights read once per row
 * and column and the index arithmetic out of the inner loop (the generic
 * loop above took 2.1x torch's time for nearest, 1.9x for bilinear at
 * 8x64x112x112 -> 56x56). The linear taps add as ATen's build does:
 * grad_input += (wh * ww) * g contracted into one fma for float32 and
 * float64, so these are torch's bits; nearest adds g itself. */
#define RS_BWD2(NAME, T, A, LOAD, STORE, FMA)                                                                  \
    OD_CPU_CLONES static void NAME(void *vc, int64_t p0, int64_t p1)                                           \
    {                                                                                                          \
        const rs_ctx *c = vc;                                                                                  \
        const od_resample_geom *g = &c->pl->g;                                                                 \
        int64_t OH = g->out[1], OW = g->out[2], IW = g->in[2], inn = g->in[0] * g->in[1] * g->in[2];           \
        int64_t C = c->pl->c;                                                                                  \
        bool lin = g->kind == OD_RESAMPLE_LINEAR;                                                              \
        int nh = c->pl->nd >= 2 ? 2 : 1;                                                                       \
        for (int64_t p = p0; p < p1; p++) {                                                                    \
            const T *go = (const T *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];                           \
            T *gi = (T *)c->y + p * inn;                                                                       \
            for (int64_t oh = 0; oh < OH; oh++) {                                                              \
                const T *gr = go + oh * c->xs[3];                                                              \
                T *r0 = gi + c->i0[1][oh] * IW, *r1 = gi + c->i1[1][oh] * IW;                                  \
                if (!lin) {                                                                                    \
                    for (int64_t ow = 0; ow < OW; ow++) {                                                      \
                        int64_t at = c->i0[2][ow];                                                             \
                        r0[at] = STORE(LOAD(r0[at]) + LOAD(gr[ow * c->xs[4]]));                                \
                    }                                                                                          \
                    continue;                                                                                  \
                }                                                                                              \
                A wd = (A)c->l0[0][0], wh0 = wd * (A)c->l0[1][oh], wh1 = wd * (A)c->l1[1][oh];                 \
                for (int64_t ow = 0; ow < OW; ow++) {                                                          \
                    A v = LOAD(gr[ow * c->xs[4]]), ww0 = (A)c->l0[2][ow], ww1 = (A)c->l1[2][ow];               \
                    int64_t w0 = c->i0[2][ow], w1 = c->i1[2][ow];                                              \
                    r0[w0] = STORE(FMA(wh0 * ww0, v, LOAD(r0[w0])));                                           \
                    r0[w1] = STORE(FMA(wh0 * ww1, v, LOAD(r0[w1])));                                           \
                    if (nh == 2) {                                                                             \
                        r1[w0] = STORE(FMA(wh1 * ww0, v, LOAD(r1[w0])));                                       \
                        r1[w1] = STORE(FMA(wh1 * ww1, v, LOAD(r1[w1])));                                       \
                    }                                                                                          \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }
#define UNFUSED_BW_(a, b, c) ((c) + (a) * (b))
RS_BWD2(bwd2_f32, float, float, F32_LD, F32_LD, fmaf)
RS_BWD2(bwd2_f64, double, double, F32_LD, F32_LD, fma)
RS_BWD2(bwd2_bf16, uint16_t, float, BF_LD, BF_ST, UNFUSED_BW_)
#undef UNFUSED_BW_

/* nearest backward of the 1d and 2d operators, each grad_input element
 * summed once from the grad_output elements that read it: nearest's source
 * index never decreases along a dim, so those are a run of rows (oh) times
 * a run of columns (c->cs[iw] .. c->cs[iw + 1]). Walking oh in order and,
 * per row, the run's columns in order adds them in ATen's order (its loop
 * over the output, grad_input[i] += grad_output[o], from a zeroed
 * grad_input), so the bits are torch's; the row a run starts writes its
 * grad_input row from 0 instead of reading it, and rows no output reads are
 * zeroed here, so grad_input need not be cleared first. RND rounds each
 * sum (bfloat16's steps, as bwd2_bf16's). 8x64x112x112 -> 56x56 float32:
 * 3.3 ms in RS_BWD2's loop (its adds chained through memory), about
 * torch's time in the runs below, 0.55 ms with 2x's pairs 16 at a time. */
__attribute__((target("avx512f"))) static void near_pairs_f32_512(const float *g, float *r, int64_t n, bool first)
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int64_t i = 0; i < n; i += 16) {
        int64_t left = n - i;
        __mmask16 m = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
        __mmask16 ma = left >= 8 ? 0xffff : (__mmask16)((1u << (2 * left)) - 1);
        __mmask16 mb = left >= 16 ? 0xffff : left > 8 ? (__mmask16)((1u << (2 * left - 16)) - 1) : 0;
        __m512 a = _mm512_maskz_loadu_ps(ma, g + 2 * i), b = _mm512_maskz_loadu_ps(mb, g + 2 * i + 16);
        __m512 s = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, r + i);
        s = _mm512_add_ps(_mm512_add_ps(s, _mm512_permutex2var_ps(a, ev, b)), _mm512_permutex2var_ps(a, od, b));
        _mm512_mask_storeu_ps(r + i, m, s);
    }
}

#define NEAR_BWD2(NAME, T, A, LOAD, STORE, RND, PAIRS)                                                         \
    OD_CPU_CLONES static void NAME(void *vc, int64_t p0, int64_t p1)                                           \
    {                                                                                                          \
        const rs_ctx *c = vc;                                                                                  \
        const od_resample_geom *g = &c->pl->g;                                                                 \
        int64_t OH = g->out[1], IH = g->in[1], IW = g->in[2], C = c->pl->c, xw = c->xs[4];                     \
        const int64_t *ih = c->i0[1], *cs = c->cs;                                                             \
        for (int64_t p = p0; p < p1; p++) {                                                                    \
            const T *go = (const T *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];                           \
            T *gi = (T *)c->y + p * IH * IW;                                                                   \
            for (int64_t oh = 0, next = 0; oh <= OH; oh++) {                                                   \
                int64_t to = oh < OH ? ih[oh] : IH; /* rows next .. to - 1 no output reads: zeros */           \
                for (; next < to; next++)                                                                      \
                    memset(gi + next * IW, 0, sizeof(T) * (size_t)IW);                                         \
                if (oh == OH)                                                                                  \
                    break;                                                                                     \
                bool first = next == to;                                                                       \
                next = to + 1;                                                                                 \
                const T *gr = go + oh * c->xs[3];                                                              \
                T *r = gi + to * IW;                                                                           \
                if (PAIRS(c, gr, r, IW, first))                                                                \
                    continue;                                                                                  \
                for (int64_t iw = 0; iw < IW; iw++) {                                                          \
                    A s = first ? 0 : LOAD(r[iw]);                                                             \
                    for (int64_t ow = cs[iw]; ow < cs[iw + 1]; ow++)                                           \
                        s = RND(s + LOAD(gr[ow * xw]));                                                        \
                    r[iw] = STORE(s);                                                                          \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }
#define NO_RND_(v) (v)
#define PAIRS_F32_(c, gr, r, n, first) ((c)->pairs && (near_pairs_f32_512(gr, r, n, first), true))
#define NO_PAIRS_(c, gr, r, n, first) ((void)(gr), (void)(r), (void)(first), false)
NEAR_BWD2(near_bwd2_f32, float, float, F32_LD, F32_LD, NO_RND_, PAIRS_F32_)
NEAR_BWD2(near_bwd2_f64, double, double, F32_LD, F32_LD, NO_RND_, NO_PAIRS_)
NEAR_BWD2(near_bwd2_bf16, uint16_t, float, BF_LD, BF_ST, od_bf16_round, NO_PAIRS_)
#undef NO_RND_
#undef PAIRS_F32_
#undef NO_PAIRS_

/* ---- bicubic: 4 x 4 taps (od_resample.h's od_resample_cubic_*) ---- */
typedef struct cb_ctx {
    const od_resample_plan *pl;
    const char *x;
    int64_t xs[4]; /* x's strides, N C H W */
    char *y;
    const int64_t *ih, *iw; /* 4 per output index */
    const double *wh, *ww;
    void *acc; /* backward: the opmath accumulator, planes x IH x IW */
    bool f64;
} cb_ctx;


/* forward, separably: each input row blended along W once per plane (hr,
 * IH x OW), then each output element from its 4 rows along H. The sums are
 * the direct formula's, in its order (W taps, then H taps), so the result
 * is bit for bit the same; without memory for hr the direct loop runs. */
#define CB_FWD(NAME, T, A, LOAD, STORE, SUM4)                                                                  \
    OD_CPU_CLONES static void NAME(void *vc, int64_t p0, int64_t p1)                                           \
    {                                                                                                          \
        const cb_ctx *c = vc;                                                                                  \
        const od_resample_geom *g = &c->pl->g;                                                                 \
        int64_t OH = g->out[1], OW = g->out[2], IH = g->in[1], C = c->pl->c;                                   \
        A *hr = malloc(sizeof(A) * (size_t)(IH * OW + 4 * OW + 4 * OH));                                       \
        A *wwa = hr ? hr + IH * OW : NULL, *wha = hr ? wwa + 4 * OW : NULL;                                    \
        if (hr) {                                                                                              \
            for (int64_t i = 0; i < 4 * OW; i++)                                                               \
                wwa[i] = (A)c->ww[i];                                                                          \
            for (int64_t i = 0; i < 4 * OH; i++)                                                               \
                wha[i] = (A)c->wh[i];                                                                          \
        }                                                                                                      \
        for (int64_t p = p0; p < p1; p++) {                                                                    \
            const T *x = (const T *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];                            \
            T *y = (T *)c->y + p * OH * OW;                                                                    \
            if (hr) {                                                                                          \
                for (int64_t r = 0; r < IH; r++) {                                                             \
                    const T *row = x + r * c->xs[2];                                                           \
                    A *h = hr + r * OW;                                                                        \
                    for (int64_t ow = 0; ow < OW; ow++) {                                                      \
                        const int64_t *iw = c->iw + 4 * ow;                                                    \
                        const A *ww = wwa + 4 * ow;                                                            \
                        h[ow] = SUM4(LOAD(row[iw[0] * c->xs[3]]), LOAD(row[iw[1] * c->xs[3]]),                 \
                                     LOAD(row[iw[2] * c->xs[3]]), LOAD(row[iw[3] * c->xs[3]]), ww);            \
                    }                                                                                          \
                }                                                                                              \
                for (int64_t oh = 0; oh < OH; oh++) {                                                          \
                    const int64_t *ih = c->ih + 4 * oh;                                                        \
                    const A *wh = wha + 4 * oh;                                                                \
                    const A *r0 = hr + ih[0] * OW, *r1 = hr + ih[1] * OW, *r2 = hr + ih[2] * OW,               \
                            *r3 = hr + ih[3] * OW;                                                             \
                    T *yo = y + oh * OW;                                                                       \
                    for (int64_t ow = 0; ow < OW; ow++)                                                        \
                        yo[ow] = STORE(SUM4(r0[ow], r1[ow], r2[ow], r3[ow], wh));                              \
                }                                                                                              \
                continue;                                                                                      \
            }                                                                                                  \
            for (int64_t oh = 0; oh < OH; oh++) {                                                              \
                const int64_t *ih = c->ih + 4 * oh;                                                            \
                const double *wh = c->wh + 4 * oh;                                                             \
                for (int64_t ow = 0; ow < OW; ow++) {                                                          \
                    const int64_t *iw = c->iw + 4 * ow;                                                        \
                    A ww[4], whv[4], r[4];                                                                     \
                    for (int k = 0; k < 4; k++)                                                                \
                        ww[k] = (A)c->ww[4 * ow + k], whv[k] = (A)wh[k];                                       \
                    for (int j = 0; j < 4; j++) {                                                              \
                        const T *row = x + ih[j] * c->xs[2];                                                   \
                        r[j] = SUM4(LOAD(row[iw[0] * c->xs[3]]), LOAD(row[iw[1] * c->xs[3]]),                  \
                                    LOAD(row[iw[2] * c->xs[3]]), LOAD(row[iw[3] * c->xs[3]]), ww);             \
                    }                                                                                          \
                    y[oh * OW + ow] = STORE(SUM4(r[0], r[1], r[2], r[3], whv));                                \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
        free(hr);                                                                                              \
    }
/* The four taps' sum: float32 and float64 as ATen's Interpolate compiled
 * with gcc's contraction (v0 * w0 fused into v1 * w1, then v2's and v3's
 * terms fused in); bfloat16 in bfloat16 steps, every product and sum
 * rounded, as its scalar_t BFloat16 computes it. */
#define SUM4_FMAF_(v0, v1, v2, v3, w) fmaf(v3, (w)[3], fmaf(v2, (w)[2], fmaf(v0, (w)[0], (v1) * (w)[1])))
#define SUM4_FMA_(v0, v1, v2, v3, w) fma(v3, (w)[3], fma(v2, (w)[2], fma(v0, (w)[0], (v1) * (w)[1])))
#define R_ od_bf16_round
#define SUM4_BF_(v0, v1, v2, v3, w)                                                                          \
    R_(R_(R_(R_((v0) * (w)[0]) + R_((v1) * (w)[1])) + R_((v2) * (w)[2])) + R_((v3) * (w)[3]))
CB_FWD(cfwd_f32, float, float, F32_LD, F32_LD, SUM4_FMAF_)
CB_FWD(cfwd_f64, double, double, F32_LD, F32_LD, SUM4_FMA_)
CB_FWD(cfwd_bf16, uint16_t, float, BF_LD, BF_ST, SUM4_BF_)
#undef R_

/* backward, float32 / float64: each plane of grad_input accumulated in
 * place (c->acc is the result) */
#define CB_BWD(NAME, T, A, LOAD, STORE)                                                                        \
    static void NAME(void *vc, int64_t p0, int64_t p1)                                                         \
    {                                                                                                          \
        const cb_ctx *c = vc;                                                                                  \
        const od_resample_geom *g = &c->pl->g;                                                                 \
        int64_t OH = g->out[1], OW = g->out[2], IH = g->in[1], IW = g->in[2], C = c->pl->c;                    \
        for (int64_t p = p0; p < p1; p++) {                                                                    \
            const T *go = (const T *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];                           \
            A *acc = (A *)c->acc + p * IH * IW;                                                                \
            for (int64_t oh = 0; oh < OH; oh++) {                                                              \
                const int64_t *ih = c->ih + 4 * oh;                                                            \
                const double *wh = c->wh + 4 * oh;                                                             \
                for (int64_t ow = 0; ow < OW; ow++) {                                                          \
                    const int64_t *iw = c->iw + 4 * ow;                                                        \
                    const double *ww = c->ww + 4 * ow;                                                         \
                    A v = LOAD(go[oh * c->xs[2] + ow * c->xs[3]]);                                             \
                    for (int k = 0; k < 4; k++) /* ATen's order: W taps outer */                              \
                        for (int j = 0; j < 4; j++)                                                            \
                            acc[ih[j] * IW + iw[k]] += v * (A)wh[j] * (A)ww[k];                                \
                }                                                                                              \
            }                                                                                                  \
            if ((void *)acc != (void *)((T *)c->y + p * IH * IW))                                              \
                for (int64_t i = 0; i < IH * IW; i++)                                                          \
                    ((T *)c->y)[p * IH * IW + i] = STORE(acc[i]);                                              \
        }                                                                                                      \
    }
CB_BWD(cbwd_f32, float, float, F32_LD, F32_LD)
CB_BWD(cbwd_f64, double, double, F32_LD, F32_LD)

/* float16 / bfloat16 backward: ATen 1.13's CPU kernel computes it in the
 * type itself (scalar_t, no opmath): the scale, the source index, the taps'
 * coefficients (cubic_taps_narrow) and every product and += are rounded to
 * it, so the grad_input accumulates in the type in its (oh, ow, W tap,
 * H tap) order. Computed in float, rounded after each operation. */
#define NR(v) ((float)od_cpu_flt_round(dt, (v)))
static void cbwd_narrow(void *vc, int64_t p0, int64_t p1)
{
    const cb_ctx *c = vc;
    const od_resample_geom *g = &c->pl->g;
    od_dtype dt = c->pl->x->dtype;
    int64_t OH = g->out[1], OW = g->out[2], IH = g->in[1], IW = g->in[2], C = c->pl->c;
    for (int64_t p = p0; p < p1; p++) {
        const uint16_t *go = (const uint16_t *)c->x + (p / C) * c->xs[0] + (p % C) * c->xs[1];
        float *acc = (float *)c->acc + p * IH * IW;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                const int64_t *ih = c->ih + 4 * oh, *iw = c->iw + 4 * ow;
                const double *wh = c->wh + 4 * oh, *ww = c->ww + 4 * ow;
                float v = (float)od_cpu_flt_at(go, dt, oh * c->xs[2] + ow * c->xs[3]);
                for (int k = 0; k < 4; k++)
                    for (int j = 0; j < 4; j++) {
                        float *a = &acc[ih[j] * IW + iw[k]];
                        *a = NR(*a + NR(NR(v * (float)wh[j]) * (float)ww[k]));
                    }
            }
        for (int64_t i = 0; i < IH * IW; i++)
            od_cpu_flt_set(c->y, dt, p * IH * IW + i, acc[i]);
    }
}

/* the backward's taps of output index o along dim d in the 16-bit type dt
 * (od_resample_cubic_f32's formula, each C++ operation on c10::Half /
 * BFloat16 rounded as it is: an operand that is an integer becomes the
 * type first; one that is a double computes in double, rounded once) */
static void cubic_taps_narrow(const od_resample_geom *g, int d, int64_t o, od_dtype dt, int64_t *ix, double *w)
{
    int64_t in = g->in[d], out = g->out[d];
    float scale, real;
    if (g->align_corners)
        scale = out > 1 ? NR(NR((float)(in - 1)) / NR((float)(out - 1))) : 0.0f;
    else
        scale = g->has_scale[d] && g->scale[d] > 0 ? NR(1.0 / g->scale[d]) : NR(NR((float)in) / NR((float)out));
    real = g->align_corners ? NR(scale * NR((float)o)) : NR(NR(scale * NR((float)o + 0.5f)) - 0.5f);
    int64_t i = (int64_t)floorf(real);
    float t = NR(real - NR((float)i)), a = -0.75f;
    float x[4] = {NR((double)t + 1.0), t, NR(1.0 - (double)t), 0};
    x[3] = NR((double)x[2] + 1.0);
    for (int k = 0; k < 4; k++) {
        float v = x[k];
        float r;
        if (k == 1 || k == 2) { /* ((a + 2) * x - (a + 3)) * x * x + 1 */
            r = NR(NR(NR(a + 2) * v) - NR(a + 3));
            r = NR(NR(NR(r * v) * v) + 1);
        } else { /* ((a * x - 5 * a) * x + 8 * a) * x - 4 * a */
            r = NR(NR(NR(a * v) - NR(5 * a)) * v);
            r = NR(NR(NR(r + NR(8 * a)) * v) - NR(4 * a));
        }
        w[k] = r;
        int64_t kk = i - 1 + k;
        ix[k] = kk < 0 ? 0 : kk > in - 1 ? in - 1 : kk;
    }
}
#undef NR

/* The forward's taps as ATen 1.13's CPU kernel builds them (UpSample-                                         \
 * Kernel.cpp's HelperInterpCubic, compiled for AVX2, where gcc fuses some                                     \
 * multiply-adds): the source index in double as one fma, its floor taken                                      \
 * through floorf, t rounded to the type, and the first two steps of                                           \
 * cubic_convolution2 and the first of cubic_convolution1 fused. Found                                         \
 * from torch's own weights (its response to one-hot inputs) and checked                                       \
 * on every output of four geometries (align_corners, explicit scales,                                         \
 * downsampling) in float32 and float64: no bit differs, where the                                             \
 * backward's taps (od_resample_cubic_*) left outputs an ulp or two off. */                                    \
#define CUBIC_FWD_TAPS_(NAME, A, FMA)                                                                          \
    static void NAME(const od_resample_geom *g, int d, int64_t o, int64_t *ix, double *w)                      \
    {                                                                                                          \
        int64_t in = g->in[d], out = g->out[d];                                                                \
        A scale;                                                                                               \
        if (g->align_corners)                                                                                  \
            scale = out > 1 ? (A)(in - 1) / (A)(out - 1) : (A)0;                                               \
        else                                                                                                   \
            scale = g->has_scale[d] && g->scale[d] > 0 ? (A)(1.0 / g->scale[d]) : (A)in / (A)out;              \
        double real = g->align_corners ? (double)scale * (double)o : fma((double)scale, (double)o + 0.5, -0.5);\
        int64_t i = (int64_t)floorf((float)real);                                                              \
        A t = (A)(real - (double)i), x2 = (A)(1.0 - (double)t);                                                \
        A x[4] = {(A)((double)t + 1.0), t, x2, (A)((double)x2 + 1.0)};                                         \
        for (int j = 0; j < 4; j++) {                                                                          \
            int64_t k = i - 1 + j;                                                                             \
            w[j] = j == 0 || j == 3 ? FMA(FMA((A)-0.75, x[j], (A)3.75), x[j], (A)-6) * x[j] + (A)3             \
                                    : FMA((A)1.25, x[j], (A)-2.25) * x[j] * x[j] + (A)1;                       \
            ix[j] = k < 0 ? 0 : k > in - 1 ? in - 1 : k;                                                       \
        }                                                                                                      \
    }
CUBIC_FWD_TAPS_(cubic_fwd_taps_f32, float, fmaf)
CUBIC_FWD_TAPS_(cubic_fwd_taps_f64, double, fma)
#undef CUBIC_FWD_TAPS_

/* bfloat16's forward taps, as the same kernel makes them with scalar_t
 * BFloat16 (acc_type float): the source index bf16_source_index gives, t
 * rounded to bfloat16, and the coefficients in bfloat16 steps, every
 * product and sum rounded (no fused multiply-adds: BFloat16's operators
 * are calls). */
static void cubic_fwd_taps_bf16(const od_resample_geom *g, int d, int64_t o, int64_t *ix, double *w)
{
#define R_ od_bf16_round
    int64_t in = g->in[d];
    float real = bf16_source_index(g, d, o);
    int64_t i = (int64_t)floorf(real);
    float t = R_(real - (float)i), x2 = R_((float)(1.0 - (double)t));
    float x[4] = {R_((float)((double)t + 1.0)), t, x2, R_((float)((double)x2 + 1.0))};
    for (int j = 0; j < 4; j++) {
        float v = x[j];
        if (j == 0 || j == 3) /* ((A * x - 5 * A) * x + 8 * A) * x - 4 * A, A = -0.75 */
            w[j] = R_(R_(R_(R_(R_(R_(-0.75f * v) + 3.75f) * v) - 6.0f) * v) + 3.0f);
        else /* ((A + 2) * x - (A + 3)) * x * x + 1 */
            w[j] = R_(R_(R_(R_(R_(1.25f * v) - 2.25f) * v) * v) + 1.0f);
        int64_t k = i - 1 + j;
        ix[j] = k < 0 ? 0 : k > in - 1 ? in - 1 : k;
    }
#undef R_
}

/* bicubic's half of od_cpu_resample: tables, then planes in parallel */
static od_status cubic_run(const od_resample_plan *pl, od_tensor *out, od_error *err)
{
    const od_resample_geom *g = &pl->g;
    int64_t OH = g->out[1], OW = g->out[2];
    int64_t *idx = malloc(sizeof(int64_t) * 4 * (size_t)(OH + OW));
    double *wt = malloc(sizeof(double) * 4 * (size_t)(OH + OW));
    bool narrow = pl->backward && (pl->x->dtype == OD_BFLOAT16 || pl->x->dtype == OD_FLOAT16);
    float *scratch = narrow ? calloc((size_t)od_tensor_numel(out), sizeof(float)) : NULL;
    if (!idx || !wt || (narrow && od_tensor_numel(out) > 0 && !scratch)) {
        free(idx);
        free(wt);
        free(scratch);
        return od_error_set(err, OD_ENOMEM, "upsample_bicubic2d: no memory for the index tables");
    }
    cb_ctx c;
    memset(&c, 0, sizeof c);
    c.pl = pl;
    c.x = od_tensor_data(pl->x);
    c.y = od_tensor_data(out);
    c.acc = narrow ? (void *)scratch : c.y;
    for (int d = 0; d < 4; d++)
        c.xs[d] = pl->x->strides[d];
    c.f64 = pl->x->dtype == OD_FLOAT64;
    bool same = pl->backward && g->in[1] == g->out[1] && g->in[2] == g->out[2];
    for (int d = 1; d < 3; d++) {
        int64_t *ix = idx + (d == 1 ? 0 : 4 * OH);
        double *w = wt + (d == 1 ? 0 : 4 * OH);
        for (int64_t o = 0; o < g->out[d]; o++) {
            if (same) { /* ATen's backward copies when the sizes match, whatever the scales */
                for (int k = 0; k < 4; k++) {
                    ix[4 * o + k] = o;
                    w[4 * o + k] = k == 1;
                }
            } else if (narrow) {
                cubic_taps_narrow(g, d, o, pl->x->dtype, ix + 4 * o, w + 4 * o);
            } else if (!pl->backward) {
                (c.f64 ? cubic_fwd_taps_f64 : pl->x->dtype == OD_BFLOAT16 ? cubic_fwd_taps_bf16 : cubic_fwd_taps_f32)(
                    g, d, o, ix + 4 * o, w + 4 * o);
            } else if (c.f64) {
                od_resample_cubic_f64(g, d, o, 0, ix + 4 * o, w + 4 * o);
            } else {
                float wf[4];
                od_resample_cubic_f32(g, d, o, 0, ix + 4 * o, wf);
                for (int k = 0; k < 4; k++)
                    w[4 * o + k] = wf[k];
            }
        }
    }
    c.ih = idx;
    c.wh = wt;
    c.iw = idx + 4 * OH;
    c.ww = wt + 4 * OH;
    void (*fn)(void *, int64_t, int64_t);
    switch (pl->x->dtype) {
    case OD_FLOAT32: fn = pl->backward ? cbwd_f32 : cfwd_f32; break;
    case OD_FLOAT64: fn = pl->backward ? cbwd_f64 : cfwd_f64; break;
    default: fn = pl->backward ? cbwd_narrow : cfwd_bf16; break; /* float16: backward only (shape_resample.c) */
    }
    int64_t per = OH * OW * 20 + 1;
    od_status st = OD_OK;
    if (pl->planes > 0 && OH * OW > 0)
        st = od_parallel_for(pl->planes, 32768 / per + 1, fn, &c);
    free(idx);
    free(wt);
    free(scratch);
    return st;
}

/* near_bwd2_*'s runs: false unless the source index never decreases along
 * H and W (each input column's outputs are then cs[iw] .. cs[iw + 1] - 1) */
static bool column_runs(const od_resample_geom *g, const int64_t *ih, const int64_t *iw, int64_t *cs)
{
    for (int64_t o = 1; o < g->out[1]; o++)
        if (ih[o] < ih[o - 1])
            return false;
    int64_t o = 0;
    for (int64_t i = 0; i <= g->in[2]; i++) {
        if (o < g->out[2] && iw[o] < i)
            return false;
        cs[i] = o;
        while (o < g->out[2] && iw[o] == i)
            o++;
    }
    return o == g->out[2];
}

od_status od_cpu_resample(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_resample_plan pl;
    od_out_spec spec;
    int nouts = 0;
    od_status st;
    if ((st = od_resample_plan_of(id, s, &pl, err)) || (st = od_shape_resample(id, s, &spec, &nouts, err)))
        return st;
    od_tensor *out = NULL;
    /* near_bwd2_* write every element; the other backwards accumulate */
    int ty = pl.x->dtype == OD_FLOAT32 ? 0 : pl.x->dtype == OD_FLOAT64 ? 1 : pl.x->dtype == OD_BFLOAT16 ? 2 : -1;
    bool near_bwd = pl.backward && pl.g.kind == OD_RESAMPLE_NEAREST && pl.nd <= 2 && ty >= 0 &&
                    pl.g.out[0] * pl.g.out[1] * pl.g.out[2] > 0;
    if ((st = (pl.backward && !near_bwd ? od_alloc_outputs : od_alloc_outputs_overwrite)(s, &spec, 1, &out, err)))
        return st;
    if (pl.g.kind == OD_RESAMPLE_CUBIC) {
        if ((st = cubic_run(&pl, out, err))) {
            od_tensor_release(out);
            return st;
        }
        s->rets[0] = od_tensor_v(out);
        s->nrets = 1;
        return OD_OK;
    }
    const od_resample_geom *g = &pl.g;
    int64_t total = g->out[0] + g->out[1] + g->out[2];
    int64_t *idx = malloc(sizeof(int64_t) * (2 * (size_t)total + (size_t)g->in[2] + 1));
    double *wt = malloc(sizeof(double) * 2 * (size_t)total);
    if (!idx || !wt) {
        free(idx);
        free(wt);
        od_tensor_release(out);
        return od_error_set(err, OD_ENOMEM, "%s: no memory for the index tables", od_op_schema(op)->name);
    }
    rs_ctx c;
    memset(&c, 0, sizeof c);
    c.pl = &pl;
    c.x = od_tensor_data(pl.x);
    c.y = od_tensor_data(out);
    int off = 3 - pl.nd;
    c.xs[0] = pl.x->strides[0];
    c.xs[1] = pl.x->strides[1];
    for (int d = 0; d < pl.nd; d++)
        c.xs[2 + off + d] = pl.x->strides[2 + d];
    bool f64 = pl.x->dtype == OD_FLOAT64;
    bool bf_near = pl.x->dtype == OD_BFLOAT16 &&
                   !(pl.nd == 2 && od_tensor_is_contiguous_as(pl.x, OD_MF_CHANNELS_LAST)) &&
                   !(pl.nd == 3 && od_tensor_is_contiguous_as(pl.x, OD_MF_CHANNELS_LAST_3D));
    for (int d = 0, at = 0; d < 3; at += (int)g->out[d], d++) {
        int64_t *a = idx + 2 * at, *b = a + g->out[d];
        double *la = wt + 2 * at, *lb = la + g->out[d];
        for (int64_t o = 0; o < g->out[d]; o++) {
            if (g->kind == OD_RESAMPLE_NEAREST) {
                a[o] = b[o] = pl.backward ? od_resample_nearest(g, d, o)
                              : f64       ? od_resample_nearest_fwd_f64(g, d, o)
                              : bf_near   ? nearest_fwd_bf16(g, d, o)
                                          : od_resample_nearest_fwd_f32(g, d, o);
                la[o] = 1;
                lb[o] = 0;
            } else if (f64) {
                od_resample_linear_f64(g, d, o, &a[o], &b[o], &la[o], &lb[o]);
            } else if (pl.x->dtype == OD_BFLOAT16) {
                linear_taps_bf16(g, d, o, &a[o], &b[o], &la[o], &lb[o]);
            } else {
                float l0, l1; /* float32's source index in double (ATen's CPU acc_type), bfloat16's in float */
                if (pl.x->dtype == OD_FLOAT32)
                    od_resample_linear_f32_acc64(g, d, o, &a[o], &b[o], &l0, &l1);
                else
                    od_resample_linear_f32(g, d, o, &a[o], &b[o], &l0, &l1);
                la[o] = l0;
                lb[o] = l1;
            }
        }
        c.i0[d] = a;
        c.i1[d] = b;
        c.l0[d] = la;
        c.l1[d] = lb;
    }
    void (*fn)(void *, int64_t, int64_t);
    switch (pl.x->dtype) {
    case OD_FLOAT32: fn = pl.backward ? bwd_f32 : fwd_f32; break;
    case OD_FLOAT64: fn = pl.backward ? bwd_f64 : fwd_f64; break;
    case OD_BFLOAT16: fn = pl.backward ? bwd_bf16 : fwd_bf16; break;
    default: fn = fwd_u8; break;
    }
    /* loops of their own, for the dtypes the direct loops above take: the
     * linear forwards (1d/2d, 3d) and the 1d/2d backwards */
    static void (*const lin2[2])(void *, int64_t, int64_t) = {lin2_f32, lin2_f64};
    static void (*const tri[2])(void *, int64_t, int64_t) = {tri_f32, tri_f64};
    static void (*const bwd2[3])(void *, int64_t, int64_t) = {bwd2_f32, bwd2_f64, bwd2_bf16};
    static void (*const near_bwd2[3])(void *, int64_t, int64_t) = {near_bwd2_f32, near_bwd2_f64, near_bwd2_bf16};
    bool lin = g->kind == OD_RESAMPLE_LINEAR;
    if (ty == 0 || ty == 1) {
        if (!pl.backward && lin && pl.nd <= 2) {
            __builtin_cpu_init();
            c.avx512 = __builtin_cpu_supports("avx512f");
            fn = lin2[ty];
        }
        if (!pl.backward && lin && pl.nd == 3)
            fn = tri[ty];
    }
    if (ty == 2 && !pl.backward && lin)
        fn = lin_fwd_bf16;
    if (ty >= 0 && pl.backward && pl.nd <= 2 && !(ty == 2 && lin)) /* bfloat16 linear: bwd_bf16's steps */
        fn = bwd2[ty];
    if (near_bwd) {
        if (column_runs(g, c.i0[1], c.i0[2], idx + 2 * total)) {
            c.cs = idx + 2 * total;
            __builtin_cpu_init();
            c.pairs = ty == 0 && c.xs[4] == 1 && g->out[2] == 2 * g->in[2] && __builtin_cpu_supports("avx512f");
            fn = near_bwd2[ty];
        } else if (od_tensor_numel(out) > 0) { /* not reached: nearest's index never decreases */
            memset(od_tensor_data(out), 0, (size_t)od_tensor_nbytes(out));
        }
    }
    if (!pl.backward && g->kind == OD_RESAMPLE_NEAREST && g->in[0] == 1 && g->out[0] == 1)
        fn = near2_fwd;
    int64_t per = g->out[0] * g->out[1] * g->out[2] * 4 + 1;
    st = OD_OK;
    if (pl.planes > 0 && g->out[0] * g->out[1] * g->out[2] > 0)
        st = od_parallel_for(pl.planes, 32768 / per + 1, fn, &c);
    free(idx);
    free(wt);
    return od_cpu_return1(s, out, st);
}
