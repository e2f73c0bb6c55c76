/* softmax.c — CPU _softmax and _log_softmax.
 *
 * Invariants:
 *  - The shape functions (kernels/shape_reduce.c) validate everything first;
 *    outputs come from od_alloc_outputs(_overwrite) (contiguous).
 *  - Compute precision: float64 in double; float32, float16 and bfloat16 in
 *    float (half types are read through a float32 copy and the result is
 *    converted back on the way out), with sums accumulated in double
 *    (float32 rows: 16 exps a lane in float first);
 *    bfloat16 instead takes torch 1.13's own steps, float sums and the
 *    roundings it keeps between passes (softmax_row_bf16, softmax_cols_bf16),
 *    because a float result rounded once is a bfloat16 step off in most rows.
 *  - Data is viewed as [outer, D, inner] over a contiguous copy in the compute
 *    dtype (no copy when the input already is one; bfloat16 rows and column
 *    blocks of up to SM_BF16_ROW elements are read and written as bfloat16,
 *    through float buffers on the stack). inner == 1 runs each row
 *    with contiguous loads; inner > 1 updates a block of adjacent columns per
 *    step, so softmax over a leading dim also reads memory contiguously.
 *  - Float32 rows of an output of OD_CPU_STREAM_BYTES or more (AVX-512) are
 *    written with streaming stores (sm_out_stream_512), the same operations
 *    as the plain path and so the same bits; each task fences before it
 *    returns.
 *  - Softmax is max-subtracted, so it never overflows (the exp's argument
 *    is <= 0 or NaN, hence od_math_exp_nonpos_f32); a NaN anywhere in a row
 *    makes that row NaN and a row of -inf gives NaN, as in torch.
 *  - Compiled with fp-contract=fast (below), as elementwise.c is: the float
 *    exp runs on FMA in the AVX2 and AVX-512 clones, as the exp operator's
 *    does; results stay within the float tolerances the tests hold them to.
 */
/* The float exp is branch-free only once gcc may if-convert its clamps:
 * with the default -ftrapping-math it keeps them as branches and the exp
 * loops stay scalar (5x slower). Nothing here reads the FP exception flags,
 * so this file gives up trapping semantics. fp-contract=fast lets the exp's
 * polynomial and range reduction run as FMAs: 4096x4096 float32 softmax on
 * two threads went from 3.55-3.58 to 2.98-3.07 ms in turns (layer_norm,
 * whose roundings must stay torch's, lives in layer_norm.c for that). It
 * must precede the includes so the inline functions of od_math.h are
 * compiled under it too. */
#pragma GCC optimize("vect-cost-model=dynamic", "no-trapping-math", "fp-contract=fast")

#include <immintrin.h>
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
#define SM_SUMB (SM_W * 16) /* elements a row's float partial sums cover */
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

/* A row's output pass with streaming stores, for outputs of
 * OD_CPU_STREAM_BYTES or more: y = (src - a) - c (log_softmax, src = x,
 * a = max, c = log(sum)) or y = src * a (softmax, src = the exps). Whole
 * aligned lines of y from its first 64-byte boundary; the elements around
 * them as scalars, the same operations, so the same bits. The caller fences
 * (_mm_sfence) before the rows are read. */
__attribute__((target("avx512f"))) static void sm_out_stream_512(const float *src, float *y, int64_t n, float a,
                                                                 float c, bool is_log)
{
    int64_t h = od_cpu_floats_before_line(y, n);
    int64_t i = 0;
    for (; i < h; i++)
        y[i] = is_log ? (src[i] - a) - c : src[i] * a;
    __m512 va = _mm512_set1_ps(a), vc = _mm512_set1_ps(c);
    if (is_log)
        for (; i + 16 <= n; i += 16)
            _mm512_stream_ps(y + i, _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(src + i), va), vc));
    else
        for (; i + 16 <= n; i += 16)
            _mm512_stream_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(src + i), va));
    for (; i < n; i++)
        y[i] = is_log ? (src[i] - a) - c : src[i] * a;
}

/* One float32 row. stream: y is written by sm_out_stream_512, and softmax's
 * exps go to ex (n floats of scratch) on the way; otherwise ex is y. */
OD_CPU_CLONES static void softmax_row_f32(const float *restrict x, float *y, float *ex, int64_t n,
                                          bool is_log, bool stream)
{
    float m = row_max(x, n);
    int64_t i = 0;
    double s8[SM_W] = {0};
    /* The exp pass also asks for the next row (x + n, y + n; rows are
     * contiguous, and a prefetch past the end does not fault), a line per
     * step: its loads and its output's write-allocates then overlap this
     * row's exp instead of stalling the next row's max pass. 4096x4096
     * (bench_core's case) went from 10.2-13.6 to 7.9-11.7 ms in turns.
     * Not y's when streaming: a line it fetches the stream then evicts.
     * Each lane sums SM_SUMB / SM_W exps in float before they join its
     * double: widening every vector took 8 of the loop's ~31 instructions,
     * and one thread over 64 rows of 4096 in cache went from 0.298 to 0.213
     * ns per element, while the error against a double reference over 400
     * random rows stayed 33.8 ulp at most and 2.71 on average (the exp's
     * own, from x - max). */
    while (i + SM_W <= n) {
        int64_t stop = n - i >= SM_SUMB ? i + SM_SUMB : i + (n - i) / SM_W * SM_W;
        float f[SM_W] = {0};
        if (is_log) {
            for (; i < stop; i += SM_W) {
                OD_CPU_PREFETCH(x + i, n, 0);
                if (!stream)
                    OD_CPU_PREFETCH(y + i, n, 1);
                for (int j = 0; j < SM_W; j++)
                    f[j] += od_math_exp_nonpos_f32(x[i + j] - m);
            }
        } else {
            for (; i < stop; i += SM_W) {
                OD_CPU_PREFETCH(x + i, n, 0);
                if (!stream)
                    OD_CPU_PREFETCH(y + i, n, 1);
                for (int j = 0; j < SM_W; j++) {
                    float e = od_math_exp_nonpos_f32(x[i + j] - m);
                    ex[i + j] = e;
                    f[j] += e;
                }
            }
        }
        for (int j = 0; j < SM_W; j++)
            s8[j] += (double)f[j];
    }
    for (int w = SM_W / 2; w >= 1; w /= 2) /* pairwise, as the 8 lanes were */
        for (int j = 0; j < w; j++)
            s8[j] += s8[j + w];
    double s = s8[0];
    for (; i < n; i++) {
        float e = od_math_exp_nonpos_f32(x[i] - m);
        if (!is_log)
            ex[i] = e;
        s += (double)e;
    }
    if (is_log) {
        float ls = (float)log(s);
        if (stream)
            sm_out_stream_512(x, y, n, m, ls, true);
        else
            row_log_out(x, y, n, m, ls);
    } else {
        float inv = (float)(1.0 / s);
        if (stream) {
            sm_out_stream_512(ex, y, n, inv, 0.0f, false);
            return;
        }
        for (i = 0; i + SM_W <= n; i += SM_W)
            for (int j = 0; j < SM_W; j++)
                ex[i + j] *= inv;
        for (; i < n; i++)
            ex[i] *= inv;
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
            float e = od_math_exp_nonpos_f32(x[i + j] - m);
            y[i + j] = e;
            a[j] += e;
        }
    for (int j = 0; i + j < n; j++) {
        float e = od_math_exp_nonpos_f32(x[i + j] - m);
        y[i + j] = e;
        a[j] += e;
    }
    for (int j = 0; j < SM_W / 2; j++)
        a[j] += a[j + SM_W / 2];
    float s = a[0];
    for (int j = 1; j < SM_W / 2 && j < n; j++) /* a row shorter than 8 has only n lanes */
        s += a[j];
    if (is_log) {
        float ls = od_bf16_round(logf(od_bf16_round(s)));
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
            FOR_J8_(b, s[j] += (double)od_math_exp_nonpos_f32(xr[j] - m[j]));
        else
            FOR_J8_(b, float e = od_math_exp_nonpos_f32(xr[j] - m[j]); yr[j] = e; s[j] += (double)e);
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
            FOR_J8_(b, s[j] += od_math_exp_nonpos_f32(x[r * ld + j] - m[j]));
        for (int64_t j = 0; j < b; j++)
            s[j] = logf(s[j]);
        for (int64_t r = 0; r < D; r++)
            FOR_J8_(b, y[r * ld + j] = (x[r * ld + j] - m[j]) - s[j]);
        return;
    }
    for (int64_t r = 0; r < D; r++)
        FOR_J8_(b, float e = od_math_exp_nonpos_f32(x[r * ld + j] - m[j]); s[j] += e; y[r * ld + j] = e);
    int64_t v = vend < 0 ? 0 : vend < b ? vend : b;
    for (int64_t r = 0; r < D; r++) {
        float *yr = y + r * ld;
        for (int64_t j = v; j < b; j++) /* the scalar tail's bfloat16 exp */
            yr[j] = od_bf16_round(yr[j]);
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
    bool stream;         /* float32 rows of a large output: y through sm_out_stream_512 */
    int64_t D, inner, nblk; /* nblk: column blocks per outer index */
} sm_ctx;

/* bfloat16 rows (column blocks) of up to this many elements are converted
 * to float one at a time on the stack: two whole-tensor conversions cost
 * twice the kernel */
#define SM_BF16_ROW 4096
/* float32 softmax rows up to this long stream their output (log_softmax
 * rows of any length), their exps going through a stack buffer first */
#define SM_STREAM_ROW 8192

/* sm_rows and sm_cols are cloned for the bfloat16 conversions on the way in
 * and out: compiled for the baseline they took half of a 4096x4096 bfloat16
 * softmax's time (13.4 ms; 9.9 cloned) */
OD_CPU_CLONES static void sm_rows(void *ctx, int64_t begin, int64_t end)
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
        else {
            const float *x = (const float *)(const void *)c->x + r * c->D;
            float *y = (float *)(void *)c->y + r * c->D;
            if (c->stream && !c->log) {
                float ex[SM_STREAM_ROW];
                softmax_row_f32(x, y, ex, c->D, false, true);
            } else
                softmax_row_f32(x, y, y, c->D, c->log, c->stream);
        }
    }
    if (c->stream)
        _mm_sfence(); /* the streamed rows are visible before the task reports done */
}

OD_CPU_CLONES static void sm_cols(void *ctx, int64_t begin, int64_t end)
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
        if ((st = od_cpu_to_dtype(self, cdt, &x, err)) || (st = od_cpu_compute_target(out, cdt, &y, err)))
            goto fail;
        c.x = od_tensor_data(x);
        c.y = od_tensor_data(y);
        if (rows) {
            c.stream = cdt == OD_FLOAT32 && !c.bf16 && (c.log || c.D <= SM_STREAM_ROW) &&
                       outer * c.D * (int64_t)sizeof(float) >= OD_CPU_STREAM_BYTES && __builtin_cpu_supports("avx512f");
            st = od_parallel_for(outer, SM_GRAIN / c.D + 1, sm_rows, &c);
        } else {
            c.nblk = (c.inner + SM_COLB - 1) / SM_COLB;
            int64_t per = (c.inner < SM_COLB ? c.inner : SM_COLB) * c.D;
            st = od_parallel_for(outer * c.nblk, SM_GRAIN / per + 1, sm_cols, &c);
        }
        od_tensor_release(x);
        x = NULL;
        if (!st)
            st = od_cpu_finish_target(out, y, err);
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
