/* softmax.c — CPU _softmax, _log_softmax and native_layer_norm.
 *
 * Invariants:
 *  - The shape functions (kernels/shape_reduce.c) validate everything first;
 *    outputs come from od_alloc_outputs (contiguous).
 *  - Compute precision: float64 in double; float32, float16 and bfloat16 in
 *    float (half types are read through a float32 copy and the result is
 *    converted back on the way out), with sums accumulated in double.
 *  - Data is viewed as [outer, D, inner] over a contiguous copy in the compute
 *    dtype (no copy when the input already is one). inner == 1 runs each row
 *    with contiguous loads; inner > 1 updates a block of adjacent columns per
 *    step, so softmax over a leading dim also reads memory contiguously.
 *  - Softmax is max-subtracted, so it never overflows; a NaN anywhere in a row
 *    makes that row NaN and a row of -inf gives NaN, as in torch.
 *  - layer_norm: mean and biased variance per row, two-pass in double;
 *    rstd = 1 / sqrt(var + eps); out = (x - mean) * rstd * weight + bias.
 */
/* od_math_exp_f32 is branch-free only once gcc may if-convert its clamps:
 * with the default -ftrapping-math it keeps them as branches and the exp
 * loops stay scalar (5x slower). Nothing here reads the FP exception flags,
 * so this file gives up trapping semantics. It must precede the includes so
 * the inline functions of od_math.h are compiled under it too. */
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math")

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_math.h"
#include "od_parallel.h"
#include "od_shape.h"

#define SM_COLB 256       /* columns per block when inner > 1 */
#define SM_GRAIN 16384    /* elements of work per parallel task, at least */

/* ---- softmax rows (contiguous) ---------------------------------------------------- */

/* Fixed 8-wide inner loops: gcc -O2 vectorises only loops it can cover
 * without an epilogue; the tails run scalar. x and y never overlap. */
OD_CPU_CLONES static void softmax_row_f32(const float *restrict x, float *restrict y, int64_t n, bool is_log)
{
    float a[8];
    for (int j = 0; j < 8; j++)
        a[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            a[j] = x[i + j] > a[j] ? x[i + j] : a[j];
    float m = a[0];
    for (int j = 1; j < 8; j++)
        m = a[j] > m ? a[j] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;

    double s8[8] = {0};
    i = 0;
    if (is_log) {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                s8[j] += (double)od_math_exp_f32(x[i + j] - m);
    } else {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) {
                float e = od_math_exp_f32(x[i + j] - m);
                y[i + j] = e;
                s8[j] += (double)e;
            }
    }
    double s = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
    for (; i < n; i++) {
        float e = od_math_exp_f32(x[i] - m);
        if (!is_log)
            y[i] = e;
        s += (double)e;
    }
    if (is_log) {
        /* (x - max) - log(sum), in torch's order. */
        float ls = (float)log(s);
        for (i = 0; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                y[i + j] = (x[i + j] - m) - ls;
        for (; i < n; i++)
            y[i] = (x[i] - m) - ls;
    } else {
        float inv = (float)(1.0 / s);
        for (i = 0; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                y[i + j] *= inv;
        for (; i < n; i++)
            y[i] *= inv;
    }
}

OD_CPU_CLONES static void softmax_row_f64(const double *restrict x, double *restrict y, int64_t n, bool is_log)
{
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = exp(x[i] - m);
        if (!is_log)
            y[i] = e;
        s += e;
    }
    if (is_log) {
        double ls = log(s);
        for (int64_t i = 0; i < n; i++)
            y[i] = (x[i] - m) - ls;
    } else {
        double inv = 1.0 / s;
        for (int64_t i = 0; i < n; i++)
            y[i] *= inv;
    }
}

/* ---- softmax columns: b adjacent columns (stride 1), D rows (stride ld) ---------- */

/* for (j = 0; j < b; j++) BODY, written as 8-wide blocks plus a tail so gcc
 * -O2 vectorises the blocks (it will not vectorise a loop needing an epilogue). */
#define FOR_J8_(b, BODY)                                  \
    do {                                                  \
        int64_t j0_ = 0;                                  \
        for (; j0_ + 8 <= (b); j0_ += 8)                  \
            for (int jj_ = 0; jj_ < 8; jj_++) {           \
                int64_t j = j0_ + jj_;                    \
                BODY;                                     \
            }                                             \
        for (int64_t j = j0_; j < (b); j++) {             \
            BODY;                                         \
        }                                                 \
    } while (0)

static void softmax_cols_f32(const float *restrict x, float *restrict y, int64_t D, int64_t ld, int64_t b, bool is_log)
{
    float m[SM_COLB], sub[SM_COLB];
    double s[SM_COLB];
    FOR_J8_(b, m[j] = -INFINITY; s[j] = 0.0);
    for (int64_t r = 0; r < D; r++) {
        const float *xr = x + r * ld;
        FOR_J8_(b, m[j] = xr[j] > m[j] ? xr[j] : m[j]);
    }
    for (int64_t r = 0; r < D; r++) {
        const float *xr = x + r * ld;
        float *yr = y + r * ld;
        if (is_log)
            FOR_J8_(b, s[j] += (double)od_math_exp_f32(xr[j] - m[j]));
        else
            FOR_J8_(b, float e = od_math_exp_f32(xr[j] - m[j]); yr[j] = e; s[j] += (double)e);
    }
    if (is_log) {
        for (int64_t j = 0; j < b; j++)
            sub[j] = (float)log(s[j]);
        for (int64_t r = 0; r < D; r++) {
            const float *xr = x + r * ld;
            float *yr = y + r * ld;
            FOR_J8_(b, yr[j] = (xr[j] - m[j]) - sub[j]);
        }
    } else {
        for (int64_t j = 0; j < b; j++)
            sub[j] = (float)(1.0 / s[j]);
        for (int64_t r = 0; r < D; r++) {
            float *yr = y + r * ld;
            FOR_J8_(b, yr[j] *= sub[j]);
        }
    }
}

static void softmax_cols_f64(const double *restrict x, double *restrict y, int64_t D, int64_t ld, int64_t b, bool is_log)
{
    double m[SM_COLB], s[SM_COLB];
    for (int64_t j = 0; j < b; j++) {
        m[j] = -INFINITY;
        s[j] = 0.0;
    }
    for (int64_t r = 0; r < D; r++)
        for (int64_t j = 0; j < b; j++)
            m[j] = x[r * ld + j] > m[j] ? x[r * ld + j] : m[j];
    for (int64_t r = 0; r < D; r++)
        for (int64_t j = 0; j < b; j++) {
            double e = exp(x[r * ld + j] - m[j]);
            if (!is_log)
                y[r * ld + j] = e;
            s[j] += e;
        }
    for (int64_t j = 0; j < b; j++)
        s[j] = is_log ? log(s[j]) : 1.0 / s[j];
    for (int64_t r = 0; r < D; r++)
        for (int64_t j = 0; j < b; j++)
            y[r * ld + j] = is_log ? (x[r * ld + j] - m[j]) - s[j] : y[r * ld + j] * s[j];
}

typedef struct sm_ctx {
    const char *x;
    char *y;
    bool f64, log;
    int64_t D, inner, nblk; /* nblk: column blocks per outer index */
} sm_ctx;

static void sm_rows(void *ctx, int64_t begin, int64_t end)
{
    const sm_ctx *c = ctx;
    for (int64_t r = begin; r < end; r++) {
        if (c->f64)
            softmax_row_f64((const double *)(const void *)c->x + r * c->D,
                            (double *)(void *)c->y + r * c->D, c->D, c->log);
        else
            softmax_row_f32((const float *)(const void *)c->x + r * c->D,
                            (float *)(void *)c->y + r * c->D, c->D, c->log);
    }
}

static void sm_cols(void *ctx, int64_t begin, int64_t end)
{
    const sm_ctx *c = ctx;
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / c->nblk, j0 = (t % c->nblk) * SM_COLB;
        int64_t b = c->inner - j0 < SM_COLB ? c->inner - j0 : SM_COLB;
        int64_t off = o * c->D * c->inner + j0;
        if (c->f64)
            softmax_cols_f64((const double *)(const void *)c->x + off, (double *)(void *)c->y + off,
                             c->D, c->inner, b, c->log);
        else
            softmax_cols_f32((const float *)(const void *)c->x + off, (float *)(void *)c->y + off,
                             c->D, c->inner, b, c->log);
    }
}

/* A contiguous tensor of dtype cdt holding x's values: x itself (retained)
 * when it already is one. *out new. */
static od_status as_compute(od_tensor *x, od_dtype cdt, od_tensor **out, od_error *err)
{
    return od_cpu_to_dtype(x, cdt, out, err);
}

/* Where a kernel writes results of dtype cdt for output `out`: out itself when
 * the dtypes agree, else a contiguous temporary copied into out at the end. */
static od_status compute_target(od_tensor *out, od_dtype cdt, od_tensor **tgt, od_error *err)
{
    if (out->dtype == cdt) {
        od_tensor_retain(out);
        *tgt = out;
        return OD_OK;
    }
    return od_tensor_empty(out->sizes, out->ndim, cdt, out->device, tgt, err);
}

static od_status finish_target(od_tensor *out, od_tensor *tgt, od_error *err)
{
    od_status st = tgt == out ? OD_OK : od_cpu_copy_into(out, tgt, err);
    od_tensor_release(tgt);
    return st;
}

od_status od_cpu_softmax(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_softmax(id, s, &spec, &nouts, err);
    if (st)
        return st;
    od_tensor *self = s->args[0].u.t, *out = NULL, *x = NULL, *y = NULL;
    int d = 0;
    if ((st = od_wrap_dim(s->args[1].u.i, self->ndim, &d, err)) ||
        (st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err))) /* every row is written */
        return st;
    od_dtype cdt = self->dtype == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32;
    if (od_tensor_numel(self) > 0) {
        if ((st = as_compute(self, cdt, &x, err)) || (st = compute_target(out, cdt, &y, err)))
            goto fail;
        sm_ctx c = {od_tensor_data(x), od_tensor_data(y), cdt == OD_FLOAT64,
                    id == OD_OPID__log_softmax, 1, 1, 1};
        int64_t outer = 1;
        for (int k = 0; k < self->ndim; k++) {
            if (k < d)
                outer *= self->sizes[k];
            else if (k == d)
                c.D = self->sizes[k];
            else
                c.inner *= self->sizes[k];
        }
        if (c.inner == 1) {
            st = od_parallel_for(outer, SM_GRAIN / c.D + 1, sm_rows, &c);
        } else {
            c.nblk = (c.inner + SM_COLB - 1) / SM_COLB;
            int64_t per = (c.inner < SM_COLB ? c.inner : SM_COLB) * c.D;
            st = od_parallel_for(outer * c.nblk, SM_GRAIN / per + 1, sm_cols, &c);
        }
        od_tensor_release(x);
        x = NULL;
        if (!st)
            st = finish_target(out, y, err);
        else
            od_tensor_release(y);
        y = NULL;
        if (st)
            goto fail;
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
fail:
    od_tensor_release(x);
    od_tensor_release(y);
    od_tensor_release(out);
    return st;
}

/* ---- layer norm ------------------------------------------------------------------- */

typedef struct ln_ctx {
    const char *x, *w, *b; /* w, b NULL when absent */
    char *y, *mean, *rstd;
    bool f64;
    int64_t N;
    double eps;
} ln_ctx;

/* y = (x - mean) * rstd * w + b over one row; w, b may be NULL. */
static void ln_apply_f32(const float *restrict x, const float *restrict w, const float *restrict b,
                         float *restrict y, int64_t n, float fm, float fr)
{
    int64_t i = 0;
    if (w && b) {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                y[i + j] = (x[i + j] - fm) * fr * w[i + j] + b[i + j];
    } else if (!w && !b) {
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++)
                y[i + j] = (x[i + j] - fm) * fr;
    }
    for (; i < n; i++)
        y[i] = (x[i] - fm) * fr * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
}

/* ATen's Welford moments turn an infinite mean or variance into NaN (inf -
 * inf where partial moments combine); a row holding inf, or whose squares
 * overflow, normalizes to NaN there, not to 0. */
static void ln_nonfinite(double *mu, double var, double *rs)
{
    if (!isfinite(*mu))
        *mu = NAN;
    if (isnan(*mu) || isinf(var))
        *rs = NAN;
}

static void ln_rows(void *ctx, int64_t begin, int64_t end)
{
    const ln_ctx *c = ctx;
    int64_t N = c->N;
    for (int64_t r = begin; r < end; r++) {
        if (c->f64) {
            const double *x = (const double *)(const void *)c->x + r * N;
            const double *w = (const double *)(const void *)c->w, *b = (const double *)(const void *)c->b;
            double *y = (double *)(void *)c->y + r * N;
            double mu = N ? od_cpu_sum_f64(x, N) / (double)N : 0.0; /* ATen: 0, and rstd NaN */
            double var = od_cpu_sqdev_f64(x, N, mu) / (double)N;
            double rs = 1.0 / sqrt(var + c->eps);
            ln_nonfinite(&mu, var, &rs);
            for (int64_t i = 0; i < N; i++)
                y[i] = (x[i] - mu) * rs * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
            ((double *)(void *)c->mean)[r] = mu;
            ((double *)(void *)c->rstd)[r] = rs;
        } else {
            const float *x = (const float *)(const void *)c->x + r * N;
            const float *w = (const float *)(const void *)c->w, *b = (const float *)(const void *)c->b;
            float *y = (float *)(void *)c->y + r * N;
            double mu = N ? od_cpu_sum_f32(x, N) / (double)N : 0.0; /* ATen: 0, and rstd NaN */
            double var = od_cpu_sqdev_f32(x, N, mu) / (double)N;
            double rs = 1.0 / sqrt(var + c->eps);
            ln_nonfinite(&mu, var, &rs);
            float fm = (float)mu, fr = (float)rs;
            ln_apply_f32(x, w, b, y, N, fm, fr);
            ((float *)(void *)c->mean)[r] = fm;
            ((float *)(void *)c->rstd)[r] = fr;
        }
    }
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
    if ((st = od_alloc_outputs(s, spec, 3, outs, err)))
        return st;
    od_dtype cdt = input->dtype == OD_FLOAT64 ? OD_FLOAT64 : OD_FLOAT32;
    int64_t M = 1, N = 1;
    for (int k = 0; k < input->ndim; k++) {
        if (k < axis)
            M *= input->sizes[k];
        else
            N *= input->sizes[k];
    }
    if (M > 0) {
        if ((st = as_compute(input, cdt, &x, err)) ||
            (weight && (st = as_compute(weight, cdt, &w, err))) ||
            (bias && (st = as_compute(bias, cdt, &b, err))))
            goto fail;
        for (int i = 0; i < 3; i++)
            if ((st = compute_target(outs[i], cdt, &tg[i], err)))
                goto fail;
        ln_ctx c = {od_tensor_data(x), w ? od_tensor_data(w) : NULL, b ? od_tensor_data(b) : NULL,
                    od_tensor_data(tg[0]), od_tensor_data(tg[1]), od_tensor_data(tg[2]),
                    cdt == OD_FLOAT64, N, eps};
        if ((st = od_parallel_for(M, SM_GRAIN / (N + 1) + 1, ln_rows, &c)))
            goto fail;
        for (int i = 0; i < 3; i++) {
            st = finish_target(outs[i], tg[i], err);
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
