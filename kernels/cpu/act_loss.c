/* act_loss.c — CPU binary_cross_entropy, glu, prelu and their _backward.
 *
 * Invariants:
 *  - od_act_loss_plan_of (shape_act_loss.c) validated the call. Every
 *    tensor is read through a contiguous copy (none when already so) of
 *    self's dtype; an operand that broadcasts is first expanded to the shape
 *    it is read in (bce: self's squeezed shape, so element i of every
 *    operand is element i of self).
 *  - The math is ATen 1.13's scalar_t expression, each operation rounded to
 *    the dtype: float32 computes in float, float64 in double, bfloat16 in
 *    float rounded after each operation where c10::BFloat16 arithmetic
 *    does (prelu, glu_backward) and once where ATen's kernel computes in
 *    float (glu).
 *  - Loops run on od_parallel_for over disjoint ranges of the output; bce's
 *    range check raises a flag that is read after the loop, so an input
 *    outside [0, 1] is refused before anything is returned.
 *  - Reductions (bce's mean/sum, prelu's weight gradient) accumulate in
 *    double and round once.
 */
/* Before every include, as elementwise.c: the dynamic cost model vectorises the float32 loops at -O2
 * (inline math included); no fp-contract, so each step keeps its rounding. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")
#endif

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_half.h"
#include "od_math.h"
#include "od_parallel.h"
#include "od_shape.h"

/* ATen's EPSILON, a float constant even for double */
#define AL_EPSILON ((double)1e-12f)

typedef struct job {
    const od_act_loss_plan *p;
    od_dtype dt;
    const void *x, *t, *g, *w; /* contiguous; w: prelu's weight, or bce's as float64 in self's shape */
    void *out, *out2;          /* out2: prelu_backward's weight-gradient collector (self's shape) */
    atomic_int bad;
    bool g_one;                /* bce backward: grad is one element, gval (rounded to dt), not g */
    double gval;
    double div;                /* bce backward (float32, no weight): the mean's divisor, else 0 */
} job;

/* ---- binary_cross_entropy ---- */

/* ATen 1.13's (t - 1) * max(log(1 - x), -100) - t * max(log(x), -100) (log of 1 - x, not log1p: its
 * signed zeros); float32 branch-free, so gcc vectorises it (od_math.h's vector logf) */
OD_CPU_CLONES static int bce_f32_loop(const float *x, const float *t, float *o, int64_t n)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float xv = x[i], tv = t[i];
        bad |= (xv < 0.f) | (xv > 1.f) | (xv != xv);
        float l1 = od_math_log_vec_f32(1.f - xv), l0 = od_math_log_vec_f32(xv);
        l1 = l1 < -100.f ? -100.f : l1;
        l0 = l0 < -100.f ? -100.f : l0;
        o[i] = (tv - 1.f) * l1 - tv * l0;
    }
    return bad;
}

static void bce_f32(job *j, int64_t b, int64_t e)
{
    if (bce_f32_loop((const float *)j->x + b, (const float *)j->t + b, (float *)j->out + b, e - b))
        atomic_store_explicit(&j->bad, 1, memory_order_relaxed);
}

static void bce_f64(job *j, int64_t b, int64_t e)
{
    const double *x = j->x, *t = j->t;
    double *o = j->out;
    int bad = 0;
    for (int64_t i = b; i < e; i++) {
        double xv = x[i], tv = t[i];
        bad |= !(xv >= 0.0 && xv <= 1.0);
        double l1 = log(1.0 - xv), l0 = log(xv);
        l1 = l1 < -100.0 ? -100.0 : l1;
        l0 = l0 < -100.0 ? -100.0 : l0;
        o[i] = (tv - 1.0) * l1 - tv * l0;
    }
    if (bad)
        atomic_store_explicit(&j->bad, 1, memory_order_relaxed);
}

/* float32 backward, the generic loop's steps in float (each rounded to
 * float there too), vectorised: through the per-element dtype dispatch 1.6e7
 * took 32 ms, torch 25 */
#define BCE_BW_LOOP_(GV, FIN)                                                  \
    for (int64_t i = 0; i < n; i++) {                                          \
        float xv = x[i], den = (1.f - xv) * xv, num = (GV) * (xv - t[i]);      \
        float r = num / (den > eps ? den : eps);                               \
        o[i] = FIN;                                                            \
    }
/* g NULL: every element's grad is g1; div != 0: the mean's pass fused (the
 * same two roundings). One loop per case, so each vectorises. */
OD_CPU_CLONES static void bce_bw_f32(const float *x, const float *t, const float *g, float g1, float div, float *o,
                                     int64_t n)
{
    const float eps = (float)AL_EPSILON;
    if (g && div != 0.f)
        BCE_BW_LOOP_(g[i], r / div)
    else if (g)
        BCE_BW_LOOP_(g[i], r)
    else if (div != 0.f)
        BCE_BW_LOOP_(g1, r / div)
    else
        BCE_BW_LOOP_(g1, r)
}
#undef BCE_BW_LOOP_

static void bce_bw(job *j, int64_t b, int64_t e)
{
    od_dtype dt = j->dt;
    if (dt == OD_FLOAT32) {
        bce_bw_f32((const float *)j->x + b, (const float *)j->t + b, j->g_one ? NULL : (const float *)j->g + b,
                   (float)j->gval, (float)j->div, (float *)j->out + b, e - b);
        return;
    }
    for (int64_t i = b; i < e; i++) {
        double xv = od_cpu_flt_at(j->x, dt, i), tv = od_cpu_flt_at(j->t, dt, i);
        double gv = j->g_one ? j->gval : od_cpu_flt_at(j->g, dt, i);
        double den = od_cpu_flt_round(dt, od_cpu_flt_round(dt, 1.0 - xv) * xv);
        double eps = od_cpu_flt_round(dt, AL_EPSILON);
        double num = od_cpu_flt_round(dt, gv * od_cpu_flt_round(dt, xv - tv));
        od_cpu_flt_set(j->out, dt, i, od_cpu_flt_round(dt, num / (den > eps ? den : eps)));
    }
}

static void bce_chunk(void *ctx, int64_t b, int64_t e)
{
    job *j = ctx;
    if (j->p->backward)
        bce_bw(j, b, e);
    else if (j->dt == OD_FLOAT32)
        bce_f32(j, b, e);
    else
        bce_f64(j, b, e);
}

/* ---- glu ---- */

/* float32 forward over one run of a row: a[k] * sigmoid(b[k]), vectorised */
OD_CPU_CLONES static void glu_f32_run(const float *a, const float *bv, float *o, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        o[k] = a[k] * (1.f / (1.f + od_math_exp_f32(-bv[k])));
}

/* output elements [b, e) of [outer, half * inner], as runs within a row (no division per element) */
static void glu_chunk(void *ctx, int64_t b, int64_t e)
{
    job *j = ctx;
    const od_act_loss_plan *p = j->p;
    od_dtype dt = j->dt;
    int64_t hi = p->half * p->inner;
    for (int64_t i = b; i < e;) {
        int64_t o = i / hi, r = i % hi, len = hi - r < e - i ? hi - r : e - i;
        int64_t ia0 = o * 2 * hi + r, ib0 = ia0 + hi;
        if (!p->backward && dt == OD_FLOAT32) {
            const float *x = j->x;
            glu_f32_run(x + ia0, x + ib0, (float *)j->out + i, len);
            i += len;
            continue;
        }
        for (int64_t k = 0; k < len; k++) {
            int64_t ia = ia0 + k, ib = ib0 + k, io = i + k;
            double a = od_cpu_flt_at(j->x, dt, ia), bv = od_cpu_flt_at(j->x, dt, ib);
            if (!p->backward) {
                if (dt == OD_FLOAT64)
                    od_cpu_flt_set(j->out, dt, io, a * (1.0 / (1.0 + exp(-bv))));
                else /* bfloat16, computed in float */
                    od_cpu_flt_set(j->out, dt, io, (float)a * (1.f / (1.f + expf(-(float)bv))));
                continue;
            }
            double g = od_cpu_flt_at(j->g, dt, io), sig;
            if (dt == OD_FLOAT64)
                sig = 1.0 / (1.0 + exp(-bv));
            else
                sig = od_cpu_flt_round(dt, 1.f / (1.f + expf(-(float)bv)));
            od_cpu_flt_set(j->out, dt, ia, od_cpu_flt_round(dt, sig * g));
            double dsig = od_cpu_flt_round(dt, od_cpu_flt_round(dt, 1.0 - sig) * sig);
            od_cpu_flt_set(j->out, dt, ib, od_cpu_flt_round(dt, od_cpu_flt_round(dt, dsig * a) * g));
        }
        i += len;
    }
}

/* ---- prelu ---- */

/* float32 forward over a run sharing one weight, vectorised: x or w * x
 * (the float product is the double one rounded once, as the loop below
 * computes it) */
OD_CPU_CLONES static void prelu_f32_run(const float *x, float w, float *o, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        o[k] = x[k] > 0 ? x[k] : w * x[k];
}

static void prelu_chunk(void *ctx, int64_t b, int64_t e)
{
    job *j = ctx;
    const od_act_loss_plan *p = j->p;
    od_dtype dt = j->dt;
    if (!p->backward && dt == OD_FLOAT32) { /* runs of one channel: no division per element */
        const float *x = j->x, *w = j->w;
        for (int64_t i = b; i < e;) {
            int64_t r = p->channels == 1 ? 0 : i % p->inner;
            int64_t len = p->channels == 1 ? e - i : (p->inner - r < e - i ? p->inner - r : e - i);
            prelu_f32_run(x + i, w[p->channels == 1 ? 0 : (i / p->inner) % p->channels], (float *)j->out + i, len);
            i += len;
        }
        return;
    }
    for (int64_t i = b; i < e; i++) {
        double xv = od_cpu_flt_at(j->x, dt, i);
        double w = od_cpu_flt_at(j->w, dt, p->channels == 1 ? 0 : (i / p->inner) % p->channels);
        if (!p->backward) {
            od_cpu_flt_set(j->out, dt, i, xv > 0 ? xv : od_cpu_flt_round(dt, w * xv));
            continue;
        }
        double g = od_cpu_flt_at(j->g, dt, i);
        od_cpu_flt_set(j->out, dt, i, xv > 0 ? g : od_cpu_flt_round(dt, w * g));
        od_cpu_flt_set(j->out2, dt, i, xv > 0 ? 0.0 : od_cpu_flt_round(dt, xv * g));
    }
}

/* prelu_backward's weight gradient when grad_output raises self's rank: ATen's collector.sum over the
 * dims the plan's wg_keep leaves out (a reduction of that layout in ATen's own order is not replayed:
 * each kept element is summed in double and rounded once) */
static od_status prelu_weight_grad_raised(const od_act_loss_plan *p, od_dtype dt, const void *coll, od_tensor *wg,
                                          od_error *err)
{
    int64_t nk = od_tensor_numel(wg), ost[OD_MAX_DIMS], idx[OD_MAX_DIMS] = {0}, step = 1;
    double *acc = calloc(nk ? (size_t)nk : 1, sizeof *acc);
    if (!acc)
        return od_error_set(err, OD_ENOMEM, "prelu_backward: out of memory");
    for (int d = p->ndim - 1; d >= 0; d--) { /* each dim's stride in the contiguous result; 0 where summed */
        bool keep = (p->wg_keep >> d) & 1u;
        ost[d] = keep ? step : 0;
        step *= keep ? p->sizes[d] : 1;
    }
    for (int64_t i = 0, o = 0; i < p->n; i++) {
        acc[o] += od_cpu_flt_at(coll, dt, i);
        for (int d = p->ndim - 1; d >= 0; d--) { /* the next element's index, last dim fastest */
            o += ost[d];
            if (++idx[d] < p->sizes[d])
                break;
            o -= ost[d] * p->sizes[d];
            idx[d] = 0;
        }
    }
    for (int64_t k = 0; k < nk; k++)
        od_cpu_flt_set(od_tensor_data(wg), dt, k, acc[k]);
    free(acc);
    return OD_OK;
}

/* ---- helpers ---- */

/* t (borrowed) squeezed, expanded to sizes[0..n) and made a contiguous
 * tensor of dtype dt: *out new. */
static od_status read_as(const od_tensor *t, bool squeeze, const int64_t *sizes, int n, od_dtype dt,
                         od_tensor **out, od_error *err)
{
    od_tensor *sq = NULL, *ex = NULL;
    od_status s = OD_OK;
    if (squeeze)
        s = od_tensor_squeeze((od_tensor *)t, &sq, err);
    if (!s)
        s = od_tensor_expand(sq ? sq : (od_tensor *)t, sizes, n, &ex, err);
    if (!s)
        s = od_cpu_to_dtype(ex, dt, out, err);
    od_tensor_release(sq);
    od_tensor_release(ex);
    return s;
}

static void squeezed_sizes(const od_tensor *t, int64_t *sizes, int *n)
{
    *n = 0;
    for (int k = 0; k < t->ndim; k++)
        if (t->sizes[k] != 1)
            sizes[(*n)++] = t->sizes[k];
}

static double sum_of(const void *p, od_dtype dt, int64_t n)
{
    if (dt == OD_FLOAT32)
        return od_cpu_sum_f32(p, n);
    if (dt == OD_FLOAT64)
        return od_cpu_sum_f64(p, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += od_cpu_flt_at(p, dt, i);
    return s;
}

static void run(job *j, int64_t n, void (*fn)(void *, int64_t, int64_t))
{
    if (n > 0 && od_parallel_for(n, OD_CPU_GRAIN, fn, j) != OD_OK)
        fn(j, 0, n);
}

/* bce: the unreduced loss or gradient into buf (self's n elements), then
 * weight and reduction as ATen applies them after its kernel. */
static od_status bce(job *j, od_tensor *t_in, od_tensor *g_in, od_tensor *out, od_error *err)
{
    const od_act_loss_plan *p = j->p;
    od_dtype dt = j->dt;
    int64_t n = p->n;
    size_t es = od_dtype_size(dt);
    bool reduced = !p->backward && (p->reduction == 1 || p->reduction == 2);
    void *buf = reduced ? malloc((size_t)(n > 0 ? n : 1) * es) : od_tensor_data(out);
    if (reduced && !buf)
        return od_error_set(err, OD_ENOMEM, "binary_cross_entropy: out of memory");
    j->t = od_tensor_data(t_in);
    j->g = g_in ? od_tensor_data(g_in) : NULL;
    j->out = buf;
    bool fused_mean = p->backward && p->reduction == 1 && !p->weight && dt == OD_FLOAT32;
    j->div = fused_mean ? (double)(float)n : 0.0;
    run(j, n, bce_chunk);
    od_status s = OD_OK;
    if (atomic_load(&j->bad)) {
        s = od_error_set(err, OD_EINVAL, "all elements of input should be between 0 and 1");
        goto done;
    }
    if (p->weight) {
        od_tensor *w = NULL;
        if ((s = read_as(p->weight, false, p->self->sizes, p->self->ndim, OD_FLOAT64, &w, err)))
            goto done;
        const double *wd = od_tensor_data(w);
        for (int64_t i = 0; i < n; i++)
            od_cpu_flt_set(buf, dt, i, od_cpu_flt_round(dt, od_cpu_flt_at(buf, dt, i) * wd[i]));
        od_tensor_release(w);
    }
    if (p->backward && p->reduction == 1 && !fused_mean) {
        double d = od_cpu_flt_round(dt, (double)n);
        for (int64_t i = 0; i < n; i++)
            od_cpu_flt_set(buf, dt, i, od_cpu_flt_round(dt, od_cpu_flt_at(buf, dt, i) / d));
    }
    if (reduced) {
        double sum = od_cpu_flt_round(dt, sum_of(buf, dt, n));
        od_cpu_flt_set(od_tensor_data(out), dt, 0, p->reduction == 1 ? od_cpu_flt_round(dt, sum / (double)n) : sum);
    }
done:
    if (reduced)
        free(buf);
    return s;
}

od_status od_cpu_act_loss(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_act_loss_plan p;
    od_out_spec spec[2];
    int nouts = 0;
    od_status stt;
    if ((stt = od_act_loss_plan_of(id, s, &p, err)) || (stt = od_shape_act_loss(id, s, spec, &nouts, err)))
        return stt;
    od_tensor *outs[2] = {NULL, NULL}, *x = NULL, *t = NULL, *g = NULL, *w = NULL, *coll = NULL;
    if ((stt = od_alloc_outputs_overwrite(s, spec, nouts, outs, err)))
        return stt;
    od_dtype dt = p.self->dtype;
    job j = {.p = &p, .dt = dt};
    atomic_init(&j.bad, 0);
    if ((stt = od_cpu_to_dtype((od_tensor *)p.self, dt, &x, err)))
        goto done;
    j.x = od_tensor_data(x);
    switch (p.kind) {
    case OD_AL_BCE: {
        int64_t sx[OD_MAX_DIMS];
        int nx;
        squeezed_sizes(p.self, sx, &nx);
        /* a one-element grad (a mean's or sum's) is read once, not expanded into a copy of self's size */
        j.g_one = p.grad && od_tensor_numel(p.grad) == 1;
        if (j.g_one)
            j.gval = od_cpu_flt_round(dt, od_cpu_load_f64(od_tensor_data(p.grad), p.grad->dtype));
        if ((stt = read_as(p.target, true, sx, nx, dt, &t, err)) ||
            (p.grad && !j.g_one && (stt = read_as(p.grad, true, sx, nx, dt, &g, err))))
            goto done;
        stt = bce(&j, t, g, outs[0], err);
        break;
    }
    case OD_AL_GLU:
        if (p.grad) {
            int64_t hs[OD_MAX_DIMS];
            memcpy(hs, p.self->sizes, (size_t)p.self->ndim * sizeof *hs);
            hs[p.dim] = p.half;
            if ((stt = read_as(p.grad, false, hs, p.self->ndim, dt, &g, err)))
                goto done;
            j.g = od_tensor_data(g);
        }
        j.out = od_tensor_data(outs[0]);
        run(&j, p.outer * p.half * p.inner, glu_chunk);
        break;
    case OD_AL_PRELU: {
        if ((stt = od_cpu_to_dtype((od_tensor *)p.weight, dt, &w, err)))
            goto done;
        j.w = od_tensor_data(w);
        j.out = od_tensor_data(outs[0]);
        if (p.grad) {
            od_tensor_release(x);
            x = NULL;
            if ((stt = read_as(p.self, false, p.sizes, p.ndim, dt, &x, err)) ||
                (stt = read_as(p.grad, false, p.sizes, p.ndim, dt, &g, err)) ||
                (stt = od_tensor_empty(p.sizes, p.ndim, dt, p.self->device, &coll, err)))
                goto done;
            j.x = od_tensor_data(x);
            j.g = od_tensor_data(g);
            j.out2 = od_tensor_data(coll);
        }
        run(&j, p.n, prelu_chunk);
        if (p.grad && p.ndim != p.self->ndim && p.channels != 1) {
            stt = prelu_weight_grad_raised(&p, dt, j.out2, outs[1], err);
        } else if (p.grad) {
            /* the collector summed over every dim but the channel's, in ATen 1.13's order (its sum kernel
             * on this layout): one weight, or slabs of one element, is one float sum rounded once; longer
             * slabs are each summed in float, rounded to the dtype, and added to the output in the dtype
             * (a half type's `scalar_t += float` converts the sum before adding: two roundings) */
            bool half = od_dtype_size(dt) == 2;
            int64_t nc = p.channels, per = nc == 1 ? p.n : p.inner;
            void *wg = od_tensor_data(outs[1]);
            for (int64_t c = 0; c < nc; c++) {
                double acc = 0;
                for (int64_t i = c * per; i < p.n; i += nc * per) {
                    double slab = 0;
                    for (int64_t k = 0; k < per && i + k < p.n; k++)
                        slab += od_cpu_flt_at(j.out2, dt, i + k);
                    acc = per == 1 ? acc + slab : od_cpu_flt_round(dt, acc + (half ? od_cpu_flt_round(dt, slab) : slab));
                }
                od_value v = od_double(od_cpu_flt_round(dt, acc));
                /* ATen fills the weight's dtype from the sum as a Scalar: c10's checked conversion */
                if ((stt = od_scalar_check_fits(&v, outs[1]->dtype, err)))
                    goto done;
                uint64_t buf;
                od_cpu_scalar_to_dtype(&v, outs[1]->dtype, &buf);
                memcpy((char *)wg + c * (int64_t)od_dtype_size(outs[1]->dtype), &buf, od_dtype_size(outs[1]->dtype));
            }
        }
        break;
    }
    default:
        stt = od_error_set(err, OD_EINTERNAL, "od_cpu_act_loss: unknown kind");
    }
done:
    od_tensor_release(x);
    od_tensor_release(t);
    od_tensor_release(g);
    od_tensor_release(w);
    od_tensor_release(coll);
    if (stt) {
        for (int i = 0; i < nouts; i++)
            od_tensor_release(outs[i]);
        return stt;
    }
    for (int i = 0; i < nouts; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = nouts;
    return OD_OK;
}
