/* pool.c — the pooling operators on the CPU: max_pool2d/3d_with_indices,
 * avg_pool2d/3d, _adaptive_avg_pool2d/3d, adaptive_max_pool2d/3d, and each
 * one's _backward.
 *
 * Invariants: od_pool_plan_of (shape_pool.c) checked everything; windows
 * come from od_pool.h, shared with the CUDA kernels. Inputs are read
 * through their strides (lead dims flattened into planes, then T, H, W),
 * so any layout works; outputs are new and contiguous. Forward work is
 * split by plane across od_parallel_for; a backward plane's gradient
 * accumulates into its own grad_input plane, so planes never race. Max
 * pools keep ATen's rule: a value wins when greater or NaN (NaN
 * propagates; among ties the first wins), the index starts at the window's
 * first element. Averages sum in the accumulation type (float for
 * bfloat16, int64 for int64, whose mean divides as integers do in ATen).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

/* A tensor seen as [planes, T, H, W] through its strides (in elements). */
typedef struct pview {
    char *base;
    int lead;
    int64_t lsz[2], lst[2]; /* lead dims' sizes and strides (at most two) */
    int64_t st[3];          /* T, H, W strides (T's 0 for 2d) */
} pview;

static pview view_of(const od_tensor *t, int lead, int nd)
{
    pview v;
    memset(&v, 0, sizeof v);
    v.base = od_tensor_data(t);
    v.lead = lead;
    for (int d = 0; d < lead; d++) {
        v.lsz[d] = t->sizes[d];
        v.lst[d] = t->strides[d];
    }
    for (int d = 0; d < nd; d++)
        v.st[3 - nd + d] = t->strides[lead + d];
    return v;
}

static inline int64_t plane_off(const pview *v, int64_t p)
{
    return v->lead == 2 ? (p / v->lsz[1]) * v->lst[0] + (p % v->lsz[1]) * v->lst[1] : p * v->lst[0];
}

typedef struct pool_ctx {
    const od_pool_plan *pl;
    pview in, go, ix;   /* self, grad_output, indices */
    char *out, *out_ix; /* contiguous outputs */
    const int64_t *win[3]; /* per dim, per output index: od_pool_window's lo, hi, step, span, tabled once */
    int64_t wa, wb;        /* max pools: the W outputs [wa, wb) whose windows are unclipped (fast rows) */
    bool fast;             /* float32 max rows run maxrow_f32_512 over [wa, wb) */
} pool_ctx;

#define WIN(c, d, o, lo, hi, step, span)                                                                       \
    do {                                                                                                        \
        const int64_t *w_ = (c)->win[d] + 4 * (o);                                                              \
        lo = w_[0], hi = w_[1], step = w_[2], span = w_[3];                                                     \
        (void)step, (void)span; /* not every loop steps or divides */                                          \
    } while (0)

/* an average's output from its window's sum (in scope: g, t0 .. wsp) */
#define AVG_OUT(sum, A, STORE, RND)                                                                                         \
    (t0 >= t1 || h0 >= h1 || w0 >= w1 ? STORE((A)0)                                                             \
     : g->kind == OD_POOL_AVG                                                                                   \
         ? STORE((sum) / (A)od_pool_avg_divisor(g, (int64_t[3]){tsp, hsp, wsp},                                 \
                                                (int64_t[3]){t1 - t0, h1 - h0, w1 - w0}))                       \
         /* ATen: sum / kT / kH / kW, each step in the sum's type */                                            \
         : STORE(RND(RND(RND((sum) / (A)(t1 - t0)) / (A)(h1 - h0)) / (A)(w1 - w0))))

/* Averages of GROUP planes side by side: every output's window is the same
 * in each plane, so their GROUP sums are independent chains that overlap,
 * where one plane's single chain waits on each add's latency. Each sum
 * keeps its own sequential order (ATen's), so the bits do not change. */
#define GROUP 8

/* ---- forward, one instantiation per storage type T and accumulation type A ---- */
#define POOL_FWD(NAME, T, A, LOAD, STORE, ISNAN, LOWEST, RND, FASTROW)                                          \
    static void NAME##_group(const pool_ctx *c, int64_t p)                                                      \
    {                                                                                                           \
        const od_pool_geom *g = &c->pl->g;                                                                      \
        int64_t on = g->out[0] * g->out[1] * g->out[2], i = 0;                                                  \
        const T *x[GROUP];                                                                                      \
        for (int q = 0; q < GROUP; q++)                                                                         \
            x[q] = (const T *)c->in.base + plane_off(&c->in, p + q);                                            \
        T *y = (T *)c->out + p * on;                                                                            \
        for (int64_t ot = 0; ot < g->out[0]; ot++) {                                                            \
            int64_t t0, t1, ts, tsp;                                                                            \
            WIN(c, 0, ot, t0, t1, ts, tsp);                                                                     \
            for (int64_t oh = 0; oh < g->out[1]; oh++) {                                                        \
                int64_t h0, h1, hs, hsp;                                                                        \
                WIN(c, 1, oh, h0, h1, hs, hsp);                                                                 \
                for (int64_t ow = 0; ow < g->out[2]; ow++, i++) {                                               \
                    int64_t w0, w1, ws, wsp;                                                                    \
                    WIN(c, 2, ow, w0, w1, ws, wsp);                                                             \
                    A sum[GROUP] = {0};                                                                         \
                    for (int64_t t = t0; t < t1; t++)                                                           \
                        for (int64_t h = h0; h < h1; h++)                                                       \
                            for (int64_t w = w0; w < w1; w++) {                                                 \
                                int64_t o = t * c->in.st[0] + h * c->in.st[1] + w * c->in.st[2];               \
                                _Pragma("GCC unroll 8") for (int q = 0; q < GROUP; q++)                         \
                                    sum[q] = RND(sum[q] + LOAD(x[q][o]));                                       \
                            }                                                                                   \
                    _Pragma("GCC unroll 8") for (int q = 0; q < GROUP; q++)                                     \
                        y[q * on + i] = AVG_OUT(sum[q], A, STORE, RND);                                                        \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
    }                                                                                                           \
    static void NAME(void *vc, int64_t p0, int64_t p1)                                                          \
    {                                                                                                           \
        const pool_ctx *c = vc;                                                                                 \
        const od_pool_geom *g = &c->pl->g;                                                                      \
        int64_t on = g->out[0] * g->out[1] * g->out[2];                                                         \
        bool mx = g->kind == OD_POOL_MAX || g->kind == OD_POOL_AMAX;                                            \
        for (int64_t p = p0; p < p1; p++) {                                                                     \
            if (!mx && p1 - p >= GROUP) {                                                                       \
                NAME##_group(c, p);                                                                             \
                p += GROUP - 1;                                                                                 \
                continue;                                                                                       \
            }                                                                                                   \
            const T *x = (const T *)c->in.base + plane_off(&c->in, p);                                          \
            T *y = (T *)c->out + p * on;                                                                        \
            int64_t *yi = c->out_ix ? (int64_t *)c->out_ix + p * on : NULL;                                     \
            int64_t i = 0;                                                                                      \
            for (int64_t ot = 0; ot < g->out[0]; ot++) {                                                        \
                int64_t t0, t1, ts, tsp;                                                                        \
                WIN(c, 0, ot, t0, t1, ts, tsp);                                                                 \
                for (int64_t oh = 0; oh < g->out[1]; oh++) {                                                    \
                    int64_t h0, h1, hs, hsp;                                                                    \
                    WIN(c, 1, oh, h0, h1, hs, hsp);                                                             \
                    for (int64_t ow = 0; ow < g->out[2]; ow++, i++) {                                           \
                        if (ow == c->wa && c->fast && FASTROW(c, x, y + i, yi + i, t0, t1, ts, h0, h1, hs)) {   \
                            i += c->wb - 1 - ow; /* the loop's increments step past wb - 1 */                   \
                            ow = c->wb - 1;                                                                     \
                            continue;                                                                           \
                        }                                                                                       \
                        int64_t w0, w1, ws, wsp;                                                                \
                        WIN(c, 2, ow, w0, w1, ws, wsp);                                                         \
                        if (mx) {                                                                               \
                            int64_t best = (t0 * g->in[1] + h0) * g->in[2] + w0, sw = c->in.st[2];              \
                            A m = LOWEST;                                                                 \
                            for (int64_t t = t0; t < t1; t += ts)                                               \
                                for (int64_t h = h0; h < h1; h += hs) {                                         \
                                    const T *xr = x + t * c->in.st[0] + h * c->in.st[1];                        \
                                    for (int64_t w = w0; w < w1; w += ws) {                                     \
                                        A v = LOAD(xr[w * sw]);                                                 \
                                        if (v > m || ISNAN(v)) {                                                \
                                            m = v;                                                              \
                                            best = (t * g->in[1] + h) * g->in[2] + w;                           \
                                        }                                                                       \
                                    }                                                                           \
                                }                                                                               \
                            y[i] = STORE(m);                                                                    \
                            yi[i] = best;                                                                       \
                            continue;                                                                           \
                        }                                                                                       \
                        A sum = 0;                                                                              \
                        for (int64_t t = t0; t < t1; t++)                                                       \
                            for (int64_t h = h0; h < h1; h++)                                                   \
                                for (int64_t w = w0; w < w1; w++)                                               \
                                    sum = RND(sum + LOAD(x[t * c->in.st[0] + h * c->in.st[1] + w * c->in.st[2]])); \
                        y[i] = AVG_OUT(sum, A, STORE, RND);                                                         \
                    }                                                                                           \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
    }

#define ID_(v) (v)
#define BF_LD(v) od_bf16_to_float(v)
#define BF_ST(v) od_float_to_bf16(v)
#define H_LD(v) od_half_to_float(v)
#define H_ST(v) od_float_to_half(v)
/* an int64 accumulator is never NaN (only avg runs on int64) */
#define NO_NAN(v) ((void)(v), 0)

/* float16 (adaptive avg 3d only): ATen sums and divides in Half, rounding each step */
#define H_RND(v) od_half_to_float(od_float_to_half(v))

/* ---- float32 max pools: a row's unclipped outputs [wa, wb) 16 at a time.
 * Each lane runs the scalar loop's comparisons in its order (greater or
 * NaN wins, the index starts at the window's first element), so values and
 * indices are the same bits. Indices are int32 in the vector (the driver
 * checks a plane has fewer than 2^31 elements). ---- */
__attribute__((target("avx512f"))) static void maxrow_f32_512(const pool_ctx *c, const float *x, float *y,
                                                               int64_t *yi, int64_t t0, int64_t t1, int64_t ts,
                                                               int64_t h0, int64_t h1, int64_t hs)
{
    const od_pool_geom *g = &c->pl->g;
    int64_t sw = g->st[2], dw = g->dil[2], kw = g->k[2], n = c->wb - c->wa, H = g->in[1], W = g->in[2];
    int64_t lo = c->wa * sw - g->pad[2]; /* the first fast output's window start */
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i lane = _mm512_mullo_epi32(iota, _mm512_set1_epi32((int32_t)sw));
    for (int64_t j = 0; j < n; j += 16) {
        int64_t nl = n - j < 16 ? n - j : 16;
        __mmask16 m = (__mmask16)((1u << nl) - 1);
        int64_t span = sw == 2 ? 2 * nl - 1 : 1; /* stride 2: the elements a tap's lanes cover (at most 31) */
        __mmask16 mlo = (__mmask16)(span >= 16 ? 0xffff : (1u << span) - 1),
                  mhi = (__mmask16)(span > 16 ? (1u << (span - 16)) - 1 : 0);
        int64_t w0 = lo + j * sw;
        __m512 best = _mm512_set1_ps(-INFINITY);
        __m512i bi = _mm512_add_epi32(lane, _mm512_set1_epi32((int32_t)((t0 * H + h0) * W + w0)));
        for (int64_t t = t0; t < t1; t += ts)
            for (int64_t h = h0; h < h1; h += hs) {
                const float *xr = x + t * c->in.st[0] + h * c->in.st[1] + w0;
                int32_t flat = (int32_t)((t * H + h) * W + w0);
                for (int64_t k = 0; k < kw; k++) {
                    const float *xp = xr + k * dw;
                    __m512 v;
                    if (sw == 1)
                        v = _mm512_maskz_loadu_ps(m, xp);
                    else if (sw == 2)
                        v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(mlo, xp), even,
                                                   _mm512_maskz_loadu_ps(mhi, xp + 16));
                    else
                        v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, lane, xp, 4);
                    __mmask16 u = _mm512_mask_cmp_ps_mask(m, v, best, _CMP_GT_OQ) | _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
                    best = _mm512_mask_mov_ps(best, u, v);
                    bi = _mm512_mask_mov_epi32(bi, u, _mm512_add_epi32(lane, _mm512_set1_epi32(flat + (int32_t)(k * dw))));
                }
            }
        _mm512_mask_storeu_ps(y + j, m, best);
        if (yi) {
            _mm512_mask_storeu_epi64(yi + j, (__mmask8)(m & 0xff), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(bi)));
            _mm512_mask_storeu_epi64(yi + j + 8, (__mmask8)(m >> 8),
                                     _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(bi, 1)));
        }
    }
}

#define MAXROW_F32(c, x, y, yi, t0, t1, ts, h0, h1, hs) (maxrow_f32_512(c, x, y, yi, t0, t1, ts, h0, h1, hs), true)
#define NO_ROW(c, x, y, yi, t0, t1, ts, h0, h1, hs) false

POOL_FWD(fwd_f32, float, float, ID_, ID_, isnan, -INFINITY, ID_, MAXROW_F32)
POOL_FWD(fwd_f64, double, double, ID_, ID_, isnan, -INFINITY, ID_, NO_ROW)
POOL_FWD(fwd_bf16, uint16_t, float, BF_LD, BF_ST, isnan, -INFINITY, ID_, NO_ROW)
POOL_FWD(fwd_f16, uint16_t, float, H_LD, H_ST, isnan, -INFINITY, H_RND, NO_ROW)
POOL_FWD(fwd_i64, int64_t, int64_t, ID_, ID_, NO_NAN, INT64_MIN, ID_, NO_ROW)

/* ---- backward: grad_input (contiguous, zeroed) += each grad_output element
 * at its index (max) or spread over its window (avg, adaptive avg) ---- */
#define POOL_BWD(NAME, T, A, LOAD, STORE)                                                                       \
    static void NAME(void *vc, int64_t p0, int64_t p1)                                                          \
    {                                                                                                           \
        const pool_ctx *c = vc;                                                                                 \
        const od_pool_geom *g = &c->pl->g;                                                                      \
        int64_t inn = g->in[0] * g->in[1] * g->in[2];                                                           \
        for (int64_t p = p0; p < p1; p++) {                                                                     \
            const T *go = (const T *)c->go.base + plane_off(&c->go, p);                                         \
            const int64_t *ix = c->ix.base ? (const int64_t *)c->ix.base + plane_off(&c->ix, p) : NULL;         \
            T *gi = (T *)c->out + p * inn;                                                                      \
            memset(gi, 0, sizeof(T) * (size_t)inn); /* here, in cache, rather than a pass of its own */         \
            for (int64_t ot = 0; ot < g->out[0]; ot++) {                                                        \
                int64_t t0, t1, ts, tsp;                                                                        \
                WIN(c, 0, ot, t0, t1, ts, tsp);                                                                 \
                for (int64_t oh = 0; oh < g->out[1]; oh++) {                                                    \
                    int64_t h0, h1, hs, hsp;                                                                    \
                    WIN(c, 1, oh, h0, h1, hs, hsp);                                                             \
                    for (int64_t ow = 0; ow < g->out[2]; ow++) {                                                \
                        int64_t o = ot * c->go.st[0] + oh * c->go.st[1] + ow * c->go.st[2];                     \
                        A gv = LOAD(go[o]);                                                                     \
                        if (ix) {                                                                               \
                            int64_t at = ix[ot * c->ix.st[0] + oh * c->ix.st[1] + ow * c->ix.st[2]];            \
                            if (at >= 0 && at < inn) /* torch checks nothing; never write outside */            \
                                gi[at] = STORE(LOAD(gi[at]) + gv);                                              \
                            continue;                                                                           \
                        }                                                                                       \
                        int64_t w0, w1, ws, wsp;                                                                \
                        WIN(c, 2, ow, w0, w1, ws, wsp);                                                         \
                        if (t0 >= t1 || h0 >= h1 || w0 >= w1)                                                   \
                            continue;                                                                           \
                        A d;                                                                                    \
                        if (g->kind == OD_POOL_AVG) {                                                           \
                            int64_t sp[3] = {tsp, hsp, wsp}, ln[3] = {t1 - t0, h1 - h0, w1 - w0};               \
                            d = gv / (A)od_pool_avg_divisor(g, sp, ln);                                         \
                        } else {                                                                                \
                            d = gv / (A)(t1 - t0) / (A)(h1 - h0) / (A)(w1 - w0);                                \
                        }                                                                                       \
                        for (int64_t t = t0; t < t1; t++)                                                       \
                            for (int64_t h = h0; h < h1; h++)                                                   \
                                for (int64_t w = w0; w < w1; w++) {                                             \
                                    int64_t at = (t * g->in[1] + h) * g->in[2] + w;                             \
                                    gi[at] = STORE(LOAD(gi[at]) + d);                                           \
                                }                                                                               \
                    }                                                                                           \
                }                                                                                               \
            }                                                                                                   \
        }                                                                                                       \
    }

POOL_BWD(bwd_f32, float, float, ID_, ID_)
POOL_BWD(bwd_f64, double, double, ID_, ID_)
POOL_BWD(bwd_bf16, uint16_t, float, BF_LD, BF_ST)
POOL_BWD(bwd_f16, uint16_t, float, H_LD, H_ST)
POOL_BWD(bwd_i64, int64_t, int64_t, ID_, ID_)

od_status od_cpu_pool(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_pool_plan pl;
    od_out_spec spec[2];
    int nouts = 0;
    od_status st;
    if ((st = od_pool_plan_of(id, s, &pl, err)) || (st = od_shape_pool(id, s, spec, &nouts, err)))
        return st;
    od_tensor *outs[2] = {NULL, NULL};
    /* every element is written: by the forward, or zeroed per plane by the backward, which accumulates */
    if ((st = od_alloc_outputs_overwrite(s, spec, nouts, outs, err)))
        return st;
    pool_ctx c;
    memset(&c, 0, sizeof c);
    c.pl = &pl;
    c.in = view_of(pl.self, pl.lead, pl.nd);
    c.out = od_tensor_data(outs[0]);
    if (pl.backward) {
        c.go = view_of(pl.grad, pl.lead, pl.nd);
        if (pl.indices)
            c.ix = view_of(pl.indices, pl.lead, pl.nd);
    } else if (nouts == 2) {
        c.out_ix = od_tensor_data(outs[1]);
    }
    void (*fn)(void *, int64_t, int64_t) = NULL;
    switch (pl.self->dtype) {
    case OD_FLOAT32: fn = pl.backward ? bwd_f32 : fwd_f32; break;
    case OD_FLOAT64: fn = pl.backward ? bwd_f64 : fwd_f64; break;
    case OD_BFLOAT16: fn = pl.backward ? bwd_bf16 : fwd_bf16; break;
    case OD_FLOAT16: fn = pl.backward ? bwd_f16 : fwd_f16; break;
    default: fn = pl.backward ? bwd_i64 : fwd_i64; break;
    }
    int64_t nwin = pl.g.out[0] + pl.g.out[1] + pl.g.out[2];
    int64_t *win = malloc(sizeof(int64_t) * 4 * (size_t)(nwin > 0 ? nwin : 1));
    if (!win)
        st = od_error_set(err, OD_ENOMEM, "%s: no memory for the window tables", od_op_schema(op)->name);
    for (int d = 0, at = 0; win && d < 3; at += (int)pl.g.out[d], d++) {
        c.win[d] = win + 4 * at;
        for (int64_t o = 0; o < pl.g.out[d]; o++) {
            int64_t *w = win + 4 * (at + o);
            od_pool_window(&pl.g, d, o, &w[0], &w[1], &w[2], &w[3]);
        }
    }
    if (win && !pl.backward && pl.g.kind == OD_POOL_MAX && pl.self->dtype == OD_FLOAT32 && c.in.st[2] == 1 &&
        pl.g.in[0] * pl.g.in[1] * pl.g.in[2] < INT32_MAX) {
        /* unclipped windows: start at o * st - pad, all k taps inside; a contiguous run of o */
        const od_pool_geom *g = &pl.g;
        c.wa = g->out[2];
        c.wb = 0;
        for (int64_t o = 0; o < g->out[2]; o++) {
            const int64_t *w = c.win[2] + 4 * o;
            int64_t start = o * g->st[2] - g->pad[2];
            if (w[0] == start && start + (g->k[2] - 1) * g->dil[2] < g->in[2]) {
                c.wa = o < c.wa ? o : c.wa;
                c.wb = o + 1;
            }
        }
        __builtin_cpu_init();
        c.fast = c.wb > c.wa && __builtin_cpu_supports("avx512f");
    }
    int64_t per = pl.g.out[0] * pl.g.out[1] * pl.g.out[2] * 9 + 1;
    if (!st && od_tensor_numel(outs[0]) > 0 && pl.planes > 0)
        st = od_parallel_for(pl.planes, 32768 / per + 1, fn, &c);
    free(win);
    if (st) {
        for (int i = 0; i < nouts; i++)
            od_tensor_release(outs[i]);
        return st;
    }
    for (int i = 0; i < nouts; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = nouts;
    return OD_OK;
}
