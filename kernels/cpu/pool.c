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
} pool_ctx;

#define WIN(c, d, o, lo, hi, step, span)                                                                       \
    do {                                                                                                        \
        const int64_t *w_ = (c)->win[d] + 4 * (o);                                                              \
        lo = w_[0], hi = w_[1], step = w_[2], span = w_[3];                                                     \
        (void)step, (void)span; /* not every loop steps or divides */                                          \
    } while (0)

/* ---- forward, one instantiation per storage type T and accumulation type A ---- */
#define POOL_FWD(NAME, T, A, LOAD, STORE, ISNAN, LOWEST, RND)                                                              \
    static void NAME(void *vc, int64_t p0, int64_t p1)                                                          \
    {                                                                                                           \
        const pool_ctx *c = vc;                                                                                 \
        const od_pool_geom *g = &c->pl->g;                                                                      \
        int64_t on = g->out[0] * g->out[1] * g->out[2];                                                         \
        for (int64_t p = p0; p < p1; p++) {                                                                     \
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
                        int64_t w0, w1, ws, wsp;                                                                \
                        WIN(c, 2, ow, w0, w1, ws, wsp);                                                         \
                        if (g->kind == OD_POOL_MAX || g->kind == OD_POOL_AMAX) {                                \
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
                        if (t0 >= t1 || h0 >= h1 || w0 >= w1) {                                                 \
                            y[i] = STORE((A)0);                                                                 \
                        } else if (g->kind == OD_POOL_AVG) {                                                    \
                            int64_t sp[3] = {tsp, hsp, wsp}, ln[3] = {t1 - t0, h1 - h0, w1 - w0};               \
                            y[i] = STORE(sum / (A)od_pool_avg_divisor(g, sp, ln));                              \
                        } else {                                                                                \
                            /* ATen: sum / kT / kH / kW, each step in the sum's type */                          \
                            y[i] = STORE(RND(RND(RND(sum / (A)(t1 - t0)) / (A)(h1 - h0)) / (A)(w1 - w0)));       \
                        }                                                                                       \
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

POOL_FWD(fwd_f32, float, float, ID_, ID_, isnan, -INFINITY, ID_)
POOL_FWD(fwd_f64, double, double, ID_, ID_, isnan, -INFINITY, ID_)
POOL_FWD(fwd_bf16, uint16_t, float, BF_LD, BF_ST, isnan, -INFINITY, ID_)
POOL_FWD(fwd_f16, uint16_t, float, H_LD, H_ST, isnan, -INFINITY, H_RND)
POOL_FWD(fwd_i64, int64_t, int64_t, ID_, ID_, NO_NAN, INT64_MIN, ID_)

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
    /* forward writes every element; backward accumulates into zeros */
    if ((st = (pl.backward ? od_alloc_outputs : od_alloc_outputs_overwrite)(s, spec, nouts, outs, err)))
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
