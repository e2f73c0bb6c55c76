/* softmax.c — CPU _softmax, _log_softmax and native_layer_norm.
 *
 * Invariants:
 *  - The shape functions (kernels/shape_reduce.c) validate everything first;
 *    outputs come from od_alloc_outputs(_overwrite) (contiguous).
 *  - Compute precision: float64 in double; float32, float16 and bfloat16 in
 *    float (half types are read through a float32 copy and the result is
 *    converted back on the way out), with sums accumulated in double;
 *    bfloat16 instead takes torch 1.13's own steps, float sums and the
 *    roundings it keeps between passes (softmax_row_bf16, softmax_cols_bf16),
 *    because a float result rounded once is a bfloat16 step off in most rows.
 *  - Data is viewed as [outer, D, inner] over a contiguous copy in the compute
 *    dtype (no copy when the input already is one; bfloat16 rows and column
 *    blocks of up to SM_BF16_ROW elements are read and written as bfloat16,
 *    through float buffers on the stack). inner == 1 runs each row
 *    with contiguous loads; inner > 1 updates a block of adjacent columns per
 *    step, so softmax over a leading dim also reads memory contiguously.
 *  - Softmax is max-subtracted, so it never overflows; a NaN anywhere in a row
 *    makes that row NaN and a row of -inf gives NaN, as in torch.
 *  - layer_norm replays ATen's kernel step for step (see its section).
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
#include "od_half.h"
#include "od_math.h"
#include "od_parallel.h"
#include "od_shape.h"

#define SM_COLB 256       /* columns per block when inner > 1 */
#define SM_GRAIN 16384    /* elements of work per parallel task, at least */

/* ---- softmax rows (contiguous) ---------------------------------------------------- */

/* Fixed SM_W-wide inner loops: gcc -O2 vectorises only loops it can cover
 * without an epilogue; the tails run scalar. 16 lanes (not 8): one zmm or
 * two ymm per step, so the max and sum chains are shorter and the exp runs
 * on whole AVX-512 vectors. x and y never overlap. */
#define SM_W 16
/* A row's max in SM_W lanes, NaN ignored (a NaN still poisons the row
 * through its exp). Always inlined, so each clone of its caller vectorises
 * it for its own ISA. */
static inline __attribute__((always_inline)) float row_max(const float *restrict x, int64_t n)
{
    float a[SM_W];
    for (int j = 0; j < SM_W; j++)
        a[j] = -INFINITY;
    int64_t i = 0;
    for (; i + SM_W <= n; i += SM_W)
        for (int j = 0; j < SM_W; j++)
            a[j] = x[i + j] > a[j] ? x[i + j] : a[j];
    float m = a[0];
    for (int j = 1; j < SM_W; j++)
        m = a[j] > m ? a[j] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/* y = (x - max) - log(sum), in torch's order; inlined as row_max is */
static inline __attribute__((always_inline)) void row_log_out(const float *restrict x, float *restrict y, int64_t n,
                                                               float m, float ls)
{
    int64_t i = 0;
    for (; i + SM_W <= n; i += SM_W)
        for (int j = 0; j < SM_W; j++)
            y[i + j] = (x[i + j] - m) - ls;
    for (; i < n; i++)
        y[i] = (x[i] - m) - ls;
}

OD_CPU_CLONES static void softmax_row_f32(const float *restrict x, float *restrict y, int64_t n, bool is_log)
{
    float m = row_max(x, n);
    int64_t i = 0;

    double s8[SM_W] = {0};
    i = 0;
    /* The exp pass also asks for the next row (x + n, y + n; rows are
     * contiguous, and a prefetch past the end does not fault), a line per
     * step: its loads and its output's write-allocates then overlap this
     * row's exp instead of stalling the next row's max pass. 4096x4096
     * (bench_core's case) went from 10.2-13.6 to 7.9-11.7 ms in turns. */
    if (is_log) {
        for (; i + SM_W <= n; i += SM_W) {
            __builtin_prefetch(x + n + i);
            __builtin_prefetch(y + n + i, 1);
            for (int j = 0; j < SM_W; j++)
                s8[j] += (double)od_math_exp_f32(x[i + j] - m);
        }
    } else {
        for (; i + SM_W <= n; i += SM_W) {
            __builtin_prefetch(x + n + i);
            __builtin_prefetch(y + n + i, 1);
            for (int j = 0; j < SM_W; j++) {
                float e = od_math_exp_f32(x[i + j] - m);
                y[i + j] = e;
                s8[j] += (double)e;
            }
        }
    }
    for (int w = SM_W / 2; w >= 1; w /= 2) /* pairwise, as the 8 lanes were */
        for (int j = 0; j < w; j++)
            s8[j] += s8[j + w];
    double s = s8[0];
    for (; i < n; i++) {
        float e = od_math_exp_f32(x[i] - m);
        if (!is_log)
            y[i] = e;
        s += (double)e;
    }
    if (is_log) {
        float ls = (float)log(s);
        row_log_out(x, y, n, m, ls);
    } else {
        float inv = (float)(1.0 / s);
        for (i = 0; i + SM_W <= n; i += SM_W)
            for (int j = 0; j < SM_W; j++)
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

/* bfloat16 rows (the last dim), as torch 1.13 runs them, measured against it
 * row by row: everything in float over bfloat16 data, but log_softmax keeps
 * the row sum and its log as bfloat16 scalars between its passes (rounded,
 * which moves a result by a bfloat16 step in most short rows: 2 steps in
 * cross_entropy's label smoothing), and softmax divides each exp by the sum
 * where the float path multiplies by 1 / sum. x holds bfloat16 values as
 * float; y is converted to bfloat16 on the way out. The sum runs in float
 * over 16 lanes (a bfloat16 vector as two float halves), the halves then
 * added, then the lanes in order, as vec::reduce_all does (a short row is
 * one zero-padded vector). */
static inline float bf_r(float x) { return od_bf16_to_float(od_float_to_bf16(x)); }

OD_CPU_CLONES static void softmax_row_bf16(const float *restrict x, float *restrict y, int64_t n, bool is_log)
{
    float m = row_max(x, n), a[SM_W];
    int64_t i;
    /* whole blocks in fixed-width loops (gcc vectorises those only); a lane
     * starts at 0, and 0 + e is e, so no block is special */
    for (int j = 0; j < SM_W; j++)
        a[j] = 0.0f;
    for (i = 0; i + SM_W <= n; i += SM_W)
        for (int j = 0; j < SM_W; j++) {
            float e = od_math_exp_f32(x[i + j] - m);
            y[i + j] = e;
            a[j] += e;
        }
    for (int j = 0; i + j < n; j++) {
        float e = od_math_exp_f32(x[i + j] - m);
        y[i + j] = e;
        a[j] += e;
    }
    for (int j = 0; j < SM_W / 2; j++)
        a[j] += a[j + SM_W / 2];
    float s = a[0];
    for (int j = 1; j < SM_W / 2 && j < n; j++) /* a row shorter than 8 has only n lanes */
        s += a[j];
    if (is_log) {
        float ls = bf_r(logf(bf_r(s)));
        row_log_out(x, y, n, m, ls);
    } else {
        for (i = 0; i + SM_W <= n; i += SM_W)
            for (int j = 0; j < SM_W; j++)
                y[i + j] /= s;
        for (; i < n; i++)
            y[i] /= s;
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

OD_CPU_CLONES static void softmax_cols_f32(const float *restrict x, float *restrict y, int64_t D, int64_t ld, int64_t b, bool is_log)
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

/* bfloat16 over another dim, as torch 1.13 runs it: float throughout, with
 * float sums running down each column in order (sums in double, as the
 * float32 path keeps them, land elsewhere for a log near 0). softmax is its
 * _vec_softmax for BFloat16, y = exp / sum: columns in whole vectors of 16
 * (those before vend) keep the exp in float; the rest run its scalar tail,
 * which stores each exp as bfloat16 before dividing (torch decides that per
 * thread chunk; this is its one-chunk split, which chunks of whole outer
 * rows also give). log_softmax is host_softmax: y = (x - max) - log(sum).
 * (For 16 or more columns torch 1.13 vectorises it and reuses the max of
 * columns 0-7 of each 16 for columns 8-15, which overflows where those
 * differ by ~88; that slip is not copied: each column uses its own max.) */
OD_CPU_CLONES static void softmax_cols_bf16(const float *restrict x, float *restrict y, int64_t D, int64_t ld, int64_t b,
                              int64_t vend, bool is_log)
{
    float m[SM_COLB], s[SM_COLB];
    FOR_J8_(b, m[j] = -INFINITY; s[j] = 0.0f);
    for (int64_t r = 0; r < D; r++)
        FOR_J8_(b, m[j] = x[r * ld + j] > m[j] ? x[r * ld + j] : m[j]);
    if (is_log) {
        for (int64_t r = 0; r < D; r++)
            FOR_J8_(b, s[j] += od_math_exp_f32(x[r * ld + j] - m[j]));
        for (int64_t j = 0; j < b; j++)
            s[j] = logf(s[j]);
        for (int64_t r = 0; r < D; r++)
            FOR_J8_(b, y[r * ld + j] = (x[r * ld + j] - m[j]) - s[j]);
        return;
    }
    for (int64_t r = 0; r < D; r++)
        FOR_J8_(b, float e = od_math_exp_f32(x[r * ld + j] - m[j]); s[j] += e; y[r * ld + j] = e);
    int64_t v = vend < 0 ? 0 : vend < b ? vend : b;
    for (int64_t r = 0; r < D; r++) {
        float *yr = y + r * ld;
        for (int64_t j = v; j < b; j++) /* the scalar tail's bfloat16 exp */
            yr[j] = bf_r(yr[j]);
        FOR_J8_(b, yr[j] /= s[j]);
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
    bool f64, log, bf16; /* bf16: the rows round as torch's bfloat16 loop does */
    bool bf16io;         /* x and y hold bfloat16 itself, converted a row or column block at a time */
    int64_t D, inner, nblk; /* nblk: column blocks per outer index */
} sm_ctx;

/* bfloat16 rows (column blocks) of up to this many elements are converted
 * to float one at a time on the stack: two whole-tensor conversions cost
 * twice the kernel */
#define SM_BF16_ROW 4096

static void sm_rows(void *ctx, int64_t begin, int64_t end)
{
    const sm_ctx *c = ctx;
    for (int64_t r = begin; r < end; r++) {
        if (c->bf16io) {
            float xf[SM_BF16_ROW], yf[SM_BF16_ROW];
            const uint16_t *xb = (const uint16_t *)(const void *)c->x + r * c->D;
            uint16_t *yb = (uint16_t *)(void *)c->y + r * c->D;
            for (int64_t i = 0; i < c->D; i++)
                xf[i] = od_bf16_to_float(xb[i]);
            softmax_row_bf16(xf, yf, c->D, c->log);
            for (int64_t i = 0; i < c->D; i++)
                yb[i] = od_float_to_bf16(yf[i]);
        } else if (c->f64)
            softmax_row_f64((const double *)(const void *)c->x + r * c->D,
                            (double *)(void *)c->y + r * c->D, c->D, c->log);
        else if (c->bf16)
            softmax_row_bf16((const float *)(const void *)c->x + r * c->D,
                             (float *)(void *)c->y + r * c->D, c->D, c->log);
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
        if (c->bf16io) { /* the block through float buffers of b columns */
            float xf[SM_BF16_ROW], yf[SM_BF16_ROW];
            const uint16_t *xb = (const uint16_t *)(const void *)c->x + off;
            uint16_t *yb = (uint16_t *)(void *)c->y + off;
            for (int64_t r = 0; r < c->D; r++)
                for (int64_t j = 0; j < b; j++)
                    xf[r * b + j] = od_bf16_to_float(xb[r * c->inner + j]);
            softmax_cols_bf16(xf, yf, c->D, b, b, c->inner - c->inner % 16 - j0, c->log);
            for (int64_t r = 0; r < c->D; r++)
                for (int64_t j = 0; j < b; j++)
                    yb[r * c->inner + j] = od_float_to_bf16(yf[r * b + j]);
        } else if (c->bf16)
            softmax_cols_bf16((const float *)(const void *)c->x + off, (float *)(void *)c->y + off, c->D,
                              c->inner, b, c->inner - c->inner % 16 - j0, c->log);
        else if (c->f64)
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
    if (od_tensor_numel(self) > 0) {
        sm_ctx c = {.f64 = self->dtype == OD_FLOAT64, .log = id == OD_OPID__log_softmax,
                    .bf16 = out->dtype == OD_BFLOAT16, .D = 1, .inner = 1, .nblk = 1};
        int64_t outer = 1;
        for (int k = 0; k < self->ndim; k++) {
            if (k < d)
                outer *= self->sizes[k];
            else if (k == d)
                c.D = self->sizes[k];
            else
                c.inner *= self->sizes[k];
        }
        /* torch's bfloat16 row kernel runs only for the last dim; [n, D, 1]
         * over dim 1 takes its other path, the column one here */
        bool rows = c.inner == 1 && !(c.bf16 && d != self->ndim - 1);
        int64_t blk = rows ? c.D : c.D * (c.inner < SM_COLB ? c.inner : SM_COLB); /* elements per task unit */
        c.bf16io = c.bf16 && self->dtype == OD_BFLOAT16 && blk <= SM_BF16_ROW;
        od_dtype cdt = c.f64 ? OD_FLOAT64 : c.bf16io ? OD_BFLOAT16 : OD_FLOAT32;
        if ((st = as_compute(self, cdt, &x, err)) || (st = compute_target(out, cdt, &y, err)))
            goto fail;
        c.x = od_tensor_data(x);
        c.y = od_tensor_data(y);
        if (rows) {
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

/* Layer norm replays ATen's CPU kernel step for step, because its rounding is
 * visible: a constant row gives fma residues (-8e-11, not 0), eps = 0 on a
 * constant row gives NaN, and where inf - inf meets in the moments decides
 * between an infinite mean, a NaN mean and a NaN or zero rstd.
 *  - Moments: RowwiseMoments, Welford per AVX2 lane (4 doubles, 8 floats;
 *    bfloat16 loads 16 and accumulates them in float as two halves of 8)
 *    over chunks of 16 vectors, the chunks cascaded pairwise, then a scalar
 *    Welford over the tail and the lanes merged one by one.
 *  - rstd = 1 / sqrt(var + eps) in the compute type; out =
 *    (x * rstd + (-rstd * mean)) * w + b, w = 1 and b = 0 when absent.
 *  - torch's build contracts a * b + c to an fma in most float and double
 *    steps, so we call fma there; which steps was measured against torch
 *    (+-1e300 rows, constant rows): all but the Welford mean update, and not
 *    in bfloat16's scalar loop (see ln_apply_bf16).
 *  - float16 has no CPU kernel in torch 1.13: it computes as float64. */
#define LN_CHUNK 16
#define LN_GROUP 4 /* chunks whose Welford chains run interleaved */

#define LN_PLAIN_ADD(a, b) ((a) + (b))
#define LN_PLAIN_SUB(a, b) ((a) - (b))
#define LN_PLAIN_MUL(a, b) ((a) * (b))
#define LN_PLAIN_DIV(a, b) ((a) / (b))

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

#define LN_ATEN_MOMENTS(NAME, T, L, H, ADD, SUB, MUL, DIV, FMA, CVT)                                    \
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
            while (g < LN_GROUP && (i + g + 1) * LN_CHUNK <= n && (i + 1) * LN_CHUNK <= n)            \
                g++;                                                                                 \
            int64_t m0 = n - i * LN_CHUNK < LN_CHUNK ? n - i * LN_CHUNK : LN_CHUNK;                  \
            T v1[LN_GROUP][H][L], v2[LN_GROUP][H][L];                                                \
            for (int q = 0; q < g; q++)                                                              \
                for (int h = 0; h < H; h++)                                                          \
                    for (int l = 0; l < L; l++)                                                      \
                        v1[q][h][l] = v2[q][h][l] = 0;                                               \
            if (g == LN_GROUP) /* a constant count: gcc keeps the accumulators in registers */     \
                LN_CHUNKS_(T, L, H, ADD, SUB, MUL, DIV, FMA, CVT, LN_GROUP, LN_CHUNK);               \
            else                                                                                     \
                LN_CHUNKS_(T, L, H, ADD, SUB, MUL, DIV, FMA, CVT, g, m0);                            \
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
LN_ATEN_MOMENTS(ln_moments_f64, double, 4, 1, LN_PLAIN_ADD, LN_PLAIN_SUB, LN_PLAIN_MUL, LN_PLAIN_DIV, fma,
                LN_CVT_D)
LN_ATEN_MOMENTS(ln_moments_f32, float, 8, 1, LN_PLAIN_ADD, LN_PLAIN_SUB, LN_PLAIN_MUL, LN_PLAIN_DIV, fmaf,
                LN_CVT_F)
/* bfloat16 loads 16 values and accumulates them in float as two halves of 8. */
LN_ATEN_MOMENTS(ln_moments_bf16, float, 8, 2, LN_PLAIN_ADD, LN_PLAIN_SUB, LN_PLAIN_MUL, LN_PLAIN_DIV, fmaf,
                LN_CVT_F)
/* Where those float moments overflow, torch 1.13's bfloat16 mean and
 * variance are what c10::BFloat16 arithmetic gives (16 lanes, every result
 * rounded to bfloat16, so a huge value's cancellation is lost and inf * 0
 * appears where the lanes merge): measured against torch, row by row. */
static inline float bf_add(float a, float b) { return bf_r(a + b); }
static inline float bf_sub(float a, float b) { return bf_r(a - b); }
static inline float bf_mul(float a, float b) { return bf_r(a * b); }
static inline float bf_div(float a, float b) { return bf_r(a / b); }
static inline float bf_fma(float a, float b, float c) { return bf_add(bf_mul(a, b), c); }
#define LN_CVT_BF(k) bf_r((float)(k))
LN_ATEN_MOMENTS(ln_moments_bf16_overflow, float, 16, 1, bf_add, bf_sub, bf_mul, bf_div, bf_fma, LN_CVT_BF)

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
} ln_ctx;

OD_CPU_CLONES static void ln_apply_f64(const double *restrict x, const double *restrict w,
                                       const double *restrict b, double *restrict y, int64_t n,
                                       double scale, double shift)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = fma(fma(x[i], scale, shift), w ? w[i] : 1.0, b ? b[i] : 0.0);
}

OD_CPU_CLONES static void ln_apply_f32(const float *restrict x, const float *restrict w,
                                       const float *restrict b, float *restrict y, int64_t n,
                                       float scale, float shift)
{
    if (w && b) {
        for (int64_t i = 0; i < n; i++)
            y[i] = fmaf(fmaf(x[i], scale, shift), w[i], b[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = fmaf(fmaf(x[i], scale, shift), w ? w[i] : 1.0f, b ? b[i] : 0.0f);
    }
}

/* bfloat16: ATen's float loop without fma, except the 16-wide vector blocks
 * of the weight-and-bias path (torch 1.13 rounds a one-element row's
 * x * rstd - rstd * mean to exactly 0 there, an fma would not). */
OD_CPU_CLONES static void ln_apply_bf16(const float *restrict x, const float *restrict w,
                                        const float *restrict b, float *restrict y, int64_t n,
                                        float scale, float shift)
{
    int64_t i = 0;
    if (w && b)
        for (; i < n - n % 16; i++)
            y[i] = fmaf(fmaf(x[i], scale, shift), w[i], b[i]);
    for (; i < n; i++) {
        float t = x[i] * scale;
        t = t + shift;
        t = t * (w ? w[i] : 1.0f);
        y[i] = t + (b ? b[i] : 0.0f);
    }
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
            (c->kind == LN_F32 ? ln_apply_f32 : ln_apply_bf16)(x, w, b, y, N, rs, -rs * mu);
            ((float *)(void *)c->mean)[r] = mu;
            ((float *)(void *)c->rstd)[r] = rs;
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
        if ((st = as_compute(input, cdt, &x, err)) ||
            (weight && (st = as_compute(weight, cdt, &w, err))) ||
            (bias && (st = as_compute(bias, cdt, &b, err))))
            goto fail;
        for (int i = 0; i < 3; i++)
            if ((st = compute_target(outs[i], cdt, &tg[i], err)))
                goto fail;
        ln_ctx c = {od_tensor_data(x), w ? od_tensor_data(w) : NULL, b ? od_tensor_data(b) : NULL,
                    od_tensor_data(tg[0]), od_tensor_data(tg[1]), od_tensor_data(tg[2]),
                    cdt == OD_FLOAT64 ? LN_F64 : input->dtype == OD_BFLOAT16 ? LN_BF16 : LN_F32, N, eps};
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
