/* scan.c — CPU cumsum, cumprod, logcumsumexp, cummax and cummin.
 *
 * Invariants:
 *  - od_shape_scan / od_scan_parse (kernels/shape_scan.c) validate every
 *    argument first; od_scan_check_dtype then refuses what ATen's CPU
 *    dispatch refuses. Outputs come from od_alloc_outputs_overwrite
 *    (contiguous, not cleared: every position is written).
 *  - The input is read through a contiguous copy (no copy when it already is
 *    one), viewed as [outer, size, inner]; each of the outer * inner lines is
 *    scanned in order, as ATen's cpu_cum_base_kernel does, so rounding
 *    matches it step for step. Lines are independent: they are split across
 *    the worker pool (od_parallel_for), each written by one thread.
 *  - cumsum/cumprod cast self to the result dtype first, then accumulate in
 *    ATen's CPU acc_type: double for float32 and float64, float for float16
 *    and bfloat16, int64 for integers (wrapping through uint64_t: no signed
 *    overflow). logcumsumexp accumulates the same way (float32 in double).
 *  - cummax/cummin compare keys (int64 for integers and bool, double for
 *    floats, both exact; float32, float64 and int64 in their own type) and
 *    copy the chosen element's bytes into values, so a NaN's payload
 *    survives. A NaN wins and stays until a later NaN takes
 *    its index; ties take the later index (ATen's >= / <=).
 *  - A 0-dim self is copied (cast for cumsum/cumprod), as ATen's fill_.
 */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

#define SCAN_GRAIN 16384 /* elements of work per parallel task, at least */

/* ---- element access by dtype ---- */

static int64_t ld_i(const void *p, od_dtype dt, int64_t i)
{
    switch (dt) {
    case OD_BOOL: return ((const bool *)p)[i];
    case OD_UINT8: return ((const uint8_t *)p)[i];
    case OD_INT8: return ((const int8_t *)p)[i];
    case OD_INT16: return ((const int16_t *)p)[i];
    case OD_INT32: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

static void st_f(void *p, od_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case OD_FLOAT16: ((uint16_t *)p)[i] = od_float_to_half((float)v); break;
    case OD_BFLOAT16: ((uint16_t *)p)[i] = od_float_to_bf16((float)v); break;
    case OD_FLOAT32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

static void st_i(void *p, od_dtype dt, int64_t i, int64_t v)
{
    switch (dt) {
    case OD_BOOL: ((bool *)p)[i] = v != 0; break;
    case OD_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case OD_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case OD_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case OD_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
    }
}

/* ATen's log_add_exp of logcumsumexp_cpu_kernel: std::min/std::max with a
 * NaN accumulator y propagate it; two equal infinities give x. */
static double log_add_exp(double x, double y)
{
    double mn = isnan(y) ? y : (y < x ? y : x);
    double mx = isnan(y) ? y : (x < y ? y : x);
    if (mn != mx || isfinite(mn))
        return log1p(exp(mn - mx)) + mx;
    return x;
}

static float log_add_exp_f(float x, float y)
{
    float mn = isnan(y) ? y : (y < x ? y : x);
    float mx = isnan(y) ? y : (x < y ? y : x);
    if (mn != mx || isfinite(mn))
        return log1pf(expf(mn - mx)) + mx;
    return x;
}

/* One line of cumsum / cumprod / logcumsumexp: n elements at stride st of x
 * (dtype dt) into y (same dtype, same offsets). */
static void cum_line(od_opid id, od_dtype dt, const void *x, void *y, int64_t base, int64_t n, int64_t st)
{
    /* cumsum's and cumprod's common dtypes without the per-element dtype
     * switch: the same accumulation (double for float32, uint64_t wrapping
     * for int64) */
#define CUM_LOOP_(T, A, OP, INIT)                                              \
    do {                                                                       \
        const T *xp = (const T *)x + base;                                     \
        T *yp = (T *)y + base;                                                 \
        A acc = INIT;                                                          \
        for (int64_t k = 0; k < n; k++) {                                      \
            acc OP (A)xp[k * st];                                              \
            yp[k * st] = (T)acc;                                               \
        }                                                                      \
        return;                                                                \
    } while (0)
    if (id == OD_OPID_cumsum || id == OD_OPID_cumprod) {
        bool sum = id == OD_OPID_cumsum;
        if (dt == OD_FLOAT32 && sum)
            CUM_LOOP_(float, double, +=, 0);
        if (dt == OD_FLOAT32)
            CUM_LOOP_(float, double, *=, 1);
        if (dt == OD_FLOAT64 && sum)
            CUM_LOOP_(double, double, +=, 0);
        if (dt == OD_FLOAT64)
            CUM_LOOP_(double, double, *=, 1);
        if (dt == OD_INT64 && sum)
            CUM_LOOP_(int64_t, uint64_t, +=, 0);
        if (dt == OD_INT64)
            CUM_LOOP_(int64_t, uint64_t, *=, 1);
    }
#undef CUM_LOOP_
    if (id == OD_OPID_logcumsumexp && (dt == OD_FLOAT32 || dt == OD_FLOAT64)) {
        double acc = -INFINITY; /* in double for float32 too, as ATen's acc_type */
        for (int64_t k = 0; k < n; k++) {
            int64_t at = base + k * st;
            acc = log_add_exp(dt == OD_FLOAT32 ? (double)((const float *)x)[at] : ((const double *)x)[at], acc);
            if (dt == OD_FLOAT32)
                ((float *)y)[at] = (float)acc;
            else
                ((double *)y)[at] = acc;
        }
        return;
    }
    if (od_dtype_is_integral(dt, true)) {
        uint64_t acc = id == OD_OPID_cumprod ? 1u : 0u;
        for (int64_t k = 0; k < n; k++) {
            uint64_t v = (uint64_t)ld_i(x, dt, base + k * st);
            acc = id == OD_OPID_cumprod ? acc * v : acc + v;
            st_i(y, dt, base + k * st, (int64_t)acc);
        }
    } else if (dt == OD_FLOAT16 || dt == OD_BFLOAT16) {
        float acc = id == OD_OPID_cumprod ? 1.0f : id == OD_OPID_cumsum ? 0.0f : -INFINITY;
        for (int64_t k = 0; k < n; k++) {
            float v = (float)od_cpu_flt_at(x, dt, base + k * st);
            acc = id == OD_OPID_cumprod ? acc * v : id == OD_OPID_cumsum ? acc + v : log_add_exp_f(v, acc);
            st_f(y, dt, base + k * st, acc);
        }
    } else {
        double acc = id == OD_OPID_cumprod ? 1.0 : id == OD_OPID_cumsum ? 0.0 : -INFINITY;
        for (int64_t k = 0; k < n; k++) {
            double v = od_cpu_flt_at(x, dt, base + k * st);
            acc = id == OD_OPID_cumprod ? acc * v : id == OD_OPID_cumsum ? acc + v : log_add_exp(v, acc);
            st_f(y, dt, base + k * st, acc);
        }
    }
}

/* One line of cummax / cummin: indices into ix, the chosen elements' bytes
 * from x into y. */
static void cummaxmin_line(bool max, od_dtype dt, const char *x, char *y, int64_t *ix, int64_t base, int64_t n,
                           int64_t st)
{
    size_t es = od_dtype_size(dt);
    int64_t idx = 0;
    /* the common dtypes typed: the same rule, the chosen value stored as
     * loaded (its bits, a NaN's payload too). The take is a branch, rare
     * on most data, tested by one compare. */
#define CUMMAXMIN_LOOP_(T, TAKES)                                              \
    do {                                                                       \
        const T *xp = (const T *)(const void *)x + base;                       \
        T *yp = (T *)(void *)y + base, out = xp[0];                            \
        for (int64_t k = 0; k < n; k++) {                                      \
            T c = xp[k * st];                                                  \
            if (__builtin_expect(TAKES, 0)) {                                  \
                out = c;                                                       \
                idx = k;                                                       \
            }                                                                  \
            ix[base + k * st] = idx;                                           \
            yp[k * st] = out;                                                  \
        }                                                                      \
        return;                                                                \
    } while (0)
    /* c takes over when it is NaN, or out is not and c >= out (<= for
     * min): !(c < out) holds in both cases and rarely otherwise, so it is
     * tested first, alone */
#define MAX_TAKES_ (!(c < out) && (c != c || out == out))
#define MIN_TAKES_ (!(c > out) && (c != c || out == out))
    if (dt == OD_FLOAT32 && max)
        CUMMAXMIN_LOOP_(float, MAX_TAKES_);
    if (dt == OD_FLOAT32)
        CUMMAXMIN_LOOP_(float, MIN_TAKES_);
    if (dt == OD_FLOAT64 && max)
        CUMMAXMIN_LOOP_(double, MAX_TAKES_);
    if (dt == OD_FLOAT64)
        CUMMAXMIN_LOOP_(double, MIN_TAKES_);
    if (dt == OD_INT64 && max)
        CUMMAXMIN_LOOP_(int64_t, c >= out);
    if (dt == OD_INT64)
        CUMMAXMIN_LOOP_(int64_t, c <= out);
#undef MAX_TAKES_
#undef MIN_TAKES_
#undef CUMMAXMIN_LOOP_
    if (od_dtype_is_integral(dt, true)) {
        int64_t out = ld_i(x, dt, base);
        for (int64_t k = 0; k < n; k++) {
            int64_t c = ld_i(x, dt, base + k * st);
            if (max ? c >= out : c <= out) {
                out = c;
                idx = k;
            }
            ix[base + k * st] = idx;
            memcpy(y + (size_t)(base + k * st) * es, x + (size_t)(base + idx * st) * es, es);
        }
    } else {
        double out = od_cpu_flt_at(x, dt, base);
        for (int64_t k = 0; k < n; k++) {
            double c = od_cpu_flt_at(x, dt, base + k * st);
            if (isnan(c) || (!isnan(out) && (max ? c >= out : c <= out))) {
                out = c;
                idx = k;
            }
            ix[base + k * st] = idx;
            memcpy(y + (size_t)(base + k * st) * es, x + (size_t)(base + idx * st) * es, es);
        }
    }
}

typedef struct scan_ctx {
    od_opid id;
    od_dtype dt;
    const char *x;
    char *y;
    int64_t *ix; /* cummax/cummin, else NULL */
    int64_t size, inner;
} scan_ctx;

/* Lines [begin, end) of the outer * inner lines. */
static void scan_lines(void *ctx, int64_t begin, int64_t end)
{
    const scan_ctx *c = ctx;
    for (int64_t l = begin; l < end; l++) {
        int64_t o = l / c->inner, j = l % c->inner, base = o * c->size * c->inner + j;
        if (c->ix)
            cummaxmin_line(c->id == OD_OPID_cummax, c->dt, c->x, c->y, c->ix, base, c->size, c->inner);
        else
            cum_line(c->id, c->dt, c->x, c->y, base, c->size, c->inner);
    }
}

od_status od_cpu_scan(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec[2];
    int nouts = 0;
    od_scan_info info;
    od_status st;
    if ((st = od_shape_scan(id, s, spec, &nouts, err)) || (st = od_scan_parse(id, s, &info, err)) ||
        (st = od_scan_check_dtype(id, s, &info, err)))
        return st;
    od_tensor *self = s->args[0].u.t, *outs[2] = {NULL, NULL}, *x = NULL;
    /* every line writes each of its positions (an empty self: empty outputs) */
    if ((st = od_alloc_outputs_overwrite(s, spec, nouts, outs, err)))
        return st;
    if (od_tensor_numel(self) > 0) {
        od_dtype vdt = outs[0]->dtype;
        if ((st = od_cpu_to_dtype(self, vdt, &x, err)))
            goto fail;
        const char *xd = od_tensor_data(x);
        char *yd = od_tensor_data(outs[0]);
        bool maxmin = id == OD_OPID_cummax || id == OD_OPID_cummin;
        int64_t *ix = maxmin ? od_tensor_data(outs[1]) : NULL;
        if (self->ndim == 0) {
            /* ATen's result.fill_(self): self's value as a Scalar, checked
             * against the result dtype (value cannot be converted ...) */
            if (!maxmin && (st = od_scan_check_fill(self->dtype, od_tensor_data(self), vdt, err))) {
                od_tensor_release(x);
                goto fail;
            }
            memcpy(yd, xd, od_dtype_size(vdt));
            if (ix)
                ix[0] = 0;
        } else {
            scan_ctx c = {id, vdt, xd, yd, ix, info.size, info.inner};
            st = od_parallel_for(info.outer * info.inner, SCAN_GRAIN / info.size + 1, scan_lines, &c);
            if (st) {
                od_tensor_release(x);
                goto fail;
            }
        }
        od_tensor_release(x);
    }
    for (int i = 0; i < nouts; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = nouts;
    return OD_OK;
fail:
    for (int i = 0; i < nouts; i++)
        od_tensor_release(outs[i]);
    return st;
}
