/* factory.c — CPU linspace, logspace, tril_indices, triu_indices and
 * _local_scalar_dense.
 *
 * Invariants:
 *  - linspace replays ATen 1.13's CPU kernel (RangeFactoriesKernel.cpp) so
 *    results agree bit for bit: the first half of the range is stepped from
 *    start, the second back from end, in the dtype's own arithmetic (step in
 *    double for integer dtypes, in the 16-bit type for float16 / bfloat16,
 *    each operation rounded as c10::Half / BFloat16 round). ATen's
 *    vectorised loop (AVX2, torch's CPU capability here) writes blocks of
 *    two vectors with Vectorized::arange(base, step), i.e. base + j * step
 *    from the block's first element, and the tail element by element; the
 *    loop below does the same with the same vector widths. Ranges longer
 *    than ATen's grain (32768) are split among torch's threads there, which
 *    moves the block starts: those agree within rounding, not bitwise.
 *  - logspace is scalar in ATen: pow(base, start + step * i) from either
 *    end, in double (float16 is not dispatched on CPU).
 *  - tril/triu_indices are written serially in ATen's order
 *    (od_tri_indices_fill).
 *  - _local_scalar_dense reads the element at the view's offset (ATen does
 *    not check the element count; item() does), an empty view's too when
 *    its storage holds one; an empty storage, which ATen reads out of
 *    bounds, is refused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

/* The one output, not cleared: linspace, logspace and tri_indices write
 * every element (a cleared 4 MB output cost as much as filling it). */
static od_status alloc1(od_shape_fn shape, od_opid id, od_stack *s, od_tensor **out, od_error *err)
{
    od_out_spec spec;
    int n = 0;
    od_status st = shape(id, s, &spec, &n, err);
    if (st)
        return st;
    return od_alloc_outputs_overwrite(s, &spec, 1, out, err);
}

static od_status ret1(od_stack *s, od_tensor *out)
{
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}

/* ---- linspace ------------------------------------------------------------------------------ */

/* 16-bit float arithmetic as c10::Half / BFloat16 do it: in float, rounded
 * back after every operation. */
typedef struct h16 {
    bool bf;
} h16;
static inline float h_rnd(h16 h, float x)
{
    return h.bf ? od_bf16_to_float(od_float_to_bf16(x)) : od_half_to_float(od_float_to_half(x));
}

/* ATen's linspace kernel is built for AVX2 with -mfma, and gcc contracts
 * its start + step * i (and end - step * k) into one fused multiply-add: so
 * does this. The lanes of Vectorized::arange (base + j * step) come out
 * unfused, as measured against torch 1.13. */

/* Integer dtypes: step in double, each value converted to the dtype (the
 * vector arange starts from the converted block base). V: lanes of a 256-bit
 * vector. */
#define LIN_INT(T, CONV, V)                                                                   \
    {                                                                                         \
        T *o = (T *)data;                                                                     \
        double st = CONV(p->start), en = CONV(p->end);                                        \
        double step = (en - st) / (double)(n - 1);                                            \
        int64_t i = begin;                                                                    \
        for (; i + 2 * (V) <= end; i += 2 * (V))                                              \
            for (int64_t b = i; b < i + 2 * (V); b += (V)) {                                  \
                T base = b < half ? CONV(fma(step, (double)b, st))                            \
                                  : CONV(fma(-step, (double)(n - b - 1), en));                \
                o[b] = base;                                                                  \
                for (int j = 1; j < (V); j++)                                                 \
                    o[b + j] = CONV((double)base + (double)j * step);                      \
            }                                                                                 \
        for (; i < end; i++)                                                                  \
            o[i] = i < half ? CONV(fma(step, (double)i, st)) : CONV(fma(-step, (double)(n - i - 1), en)); \
    }

static inline int64_t cv_i64(double d) { return od_double_to_i64(d); }
static inline int32_t cv_i32(double d) { return od_double_to_i32(d); }
static inline int16_t cv_i16(double d) { return (int16_t)od_double_to_i32(d); }
static inline int8_t cv_i8(double d) { return (int8_t)od_double_to_i32(d); }
static inline uint8_t cv_u8(double d) { return OD_CPU_FROM_F64_UINT8(d); }

/* Elements [begin, end) of the range; begin is a multiple of LIN_ALIGN, so
 * the blocks are those of one pass over the whole range, and the answer
 * does not depend on how the range is split. */
#define LIN_ALIGN 64 /* the longest block: two vectors of 32 (int8, uint8) */
static inline __attribute__((always_inline)) void linspace_range(const od_linspace_params *p, void *data,
                                                                 int64_t begin, int64_t end)
{
    int64_t n = p->steps, half = n / 2;
    switch (p->dtype) {
    case OD_FLOAT32: {
        float *o = data, st = (float)p->start, en = (float)p->end;
        float step = (en - st) / (float)(n - 1), js[8]; /* js: each lane's j * step, the same in every block */
        for (int j = 0; j < 8; j++)
            js[j] = (float)j * step;
        int64_t i = begin;
        for (; i + 16 <= end; i += 16)
            for (int64_t b = i; b < i + 16; b += 8) {
                float base = b < half ? fmaf(step, (float)b, st) : fmaf(-step, (float)(n - b - 1), en);
                for (int j = 0; j < 8; j++)
                    o[b + j] = base + js[j];
                o[b] = base; /* lane 0 is base itself (-0.0 + 0.0 would be +0.0) */
            }
        for (; i < end; i++)
            o[i] = i < half ? fmaf(step, (float)i, st) : fmaf(-step, (float)(n - i - 1), en);
        break;
    }
    case OD_FLOAT64: {
        double *o = data, st = p->start, en = p->end;
        double step = (en - st) / (double)(n - 1), js[4];
        for (int j = 0; j < 4; j++)
            js[j] = (double)j * step;
        int64_t i = begin;
        for (; i + 8 <= end; i += 8)
            for (int64_t b = i; b < i + 8; b += 4) {
                double base = b < half ? fma(step, (double)b, st) : fma(-step, (double)(n - b - 1), en);
                for (int j = 0; j < 4; j++)
                    o[b + j] = base + js[j];
                o[b] = base;
            }
        for (; i < end; i++)
            o[i] = i < half ? fma(step, (double)i, st) : fma(-step, (double)(n - i - 1), en);
        break;
    }
    case OD_FLOAT16:
    case OD_BFLOAT16: {
        /* c10::Half / BFloat16 operators round after each step: nothing fuses */
        h16 h = {p->dtype == OD_BFLOAT16};
        uint16_t *o = data;
        float st = h_rnd(h, (float)p->start), en = h_rnd(h, (float)p->end);
        float step = h_rnd(h, h_rnd(h, en - st) / h_rnd(h, (float)(n - 1)));
#define H_AT(k) ((k) < half ? h_rnd(h, st + h_rnd(h, step * h_rnd(h, (float)(k))))                     \
                            : h_rnd(h, en - h_rnd(h, step * h_rnd(h, (float)(n - (k) - 1)))))
#define H_OUT(x) (h.bf ? od_float_to_bf16(x) : od_float_to_half(x))
        int64_t i = begin;
        for (; i + 32 <= end; i += 32)
            for (int64_t b = i; b < i + 32; b += 16) {
                float base = H_AT(b);
                for (int j = 0; j < 16; j++)
                    o[b + j] = H_OUT(h_rnd(h, base + h_rnd(h, h_rnd(h, (float)j) * step)));
            }
        for (; i < end; i++)
            o[i] = H_OUT(H_AT(i));
#undef H_AT
#undef H_OUT
        break;
    }
    case OD_INT64: LIN_INT(int64_t, cv_i64, 4) break;
    case OD_INT32: LIN_INT(int32_t, cv_i32, 8) break;
    case OD_INT16: LIN_INT(int16_t, cv_i16, 16) break;
    case OD_INT8: LIN_INT(int8_t, cv_i8, 32) break;
    case OD_UINT8: LIN_INT(uint8_t, cv_u8, 32) break;
    default: break;
    }
}

/* The same compiled for AVX2 and FMA hardware: fma() and fmaf() are then
 * one instruction each instead of a libm call (the build's baseline has no
 * FMA; both are exact, so the values are the same), and a block's lanes one
 * vector add (no contraction: the build is ISO C, -ffp-contract=off). */
__attribute__((target("avx2,fma"))) static void linspace_range_fma(const od_linspace_params *p, void *data, int64_t begin,
                                                             int64_t end)
{
    linspace_range(p, data, begin, end);
}

typedef struct lin_job {
    const od_linspace_params *p;
    void *data;
    bool fma;
} lin_job;

/* blocks [b0, b1) of LIN_ALIGN elements */
static void linspace_blocks(void *ctx, int64_t b0, int64_t b1)
{
    const lin_job *j = ctx;
    int64_t begin = b0 * LIN_ALIGN, end = b1 * LIN_ALIGN < j->p->steps ? b1 * LIN_ALIGN : j->p->steps;
    if (j->fma)
        linspace_range_fma(j->p, j->data, begin, end);
    else
        linspace_range(j->p, j->data, begin, end);
}

/* The whole range, in parallel past 32768 elements (1e6 float32 took 602 us
 * on one thread through libm's fmaf, torch 97 us) */
static od_status linspace_fill(const od_linspace_params *p, void *data)
{
    __builtin_cpu_init();
    lin_job j = {p, data, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")};
    return od_parallel_for((p->steps + LIN_ALIGN - 1) / LIN_ALIGN, 32768 / LIN_ALIGN, linspace_blocks, &j);
}

/* logspace (RangeFactories.cpp, scalar, no FMA): the exponent start + step *
 * i (or end - step * (steps - 1 - i)) in double, step = double(end - start)
 * / (steps - 1) with the difference taken in the dtype, the power in
 * double, stored in the dtype. */
#define LOG_LOOP(T, ST, EN, DIFF, STORE)                                                      \
    {                                                                                         \
        T *o = data;                                                                          \
        double step = (double)(DIFF) / (double)(n - 1);                                       \
        for (int64_t i = 0; i < n; i++)                                                       \
            o[i] = STORE(pow(base, i < half ? (double)(ST) + step * (double)i                 \
                                            : (double)(EN) - step * (double)(n - i - 1)));   \
    }
static inline float st_f32(double d) { return (float)d; }
static inline double st_f64(double d) { return d; }
static inline uint16_t st_bf16(double d) { return od_double_to_bf16(d); }

static void logspace_fill(const od_linspace_params *p, void *data)
{
    int64_t n = p->steps, half = n / 2;
    double base = p->base;
    switch (p->dtype) {
    case OD_FLOAT32: {
        float st = (float)p->start, en = (float)p->end;
        LOG_LOOP(float, st, en, en - st, st_f32)
        break;
    }
    case OD_FLOAT64: {
        double st = p->start, en = p->end;
        LOG_LOOP(double, st, en, en - st, st_f64)
        break;
    }
    case OD_BFLOAT16: {
        h16 h = {true};
        float st = h_rnd(h, (float)p->start), en = h_rnd(h, (float)p->end);
        LOG_LOOP(uint16_t, st, en, h_rnd(h, en - st), st_bf16)
        break;
    }
#define LOG_INT(DT, T, CONV)                                                                  \
    case OD_##DT: {                                                                           \
        int64_t st = CONV(p->start), en = CONV(p->end);                                       \
        LOG_LOOP(T, st, en, (int64_t)((uint64_t)en - (uint64_t)st), CONV)                     \
        break;                                                                                \
    }
        LOG_INT(INT64, int64_t, cv_i64)
        LOG_INT(INT32, int32_t, cv_i32)
        LOG_INT(INT16, int16_t, cv_i16)
        LOG_INT(INT8, int8_t, cv_i8)
        LOG_INT(UINT8, uint8_t, cv_u8)
#undef LOG_INT
    default: break;
    }
}

od_status od_cpu_linspace(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_linspace_params p;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_linspace_params_of(id, s, &p, err)) || (st = alloc1(od_shape_linspace, id, s, &out, err)))
        return st;
    if (p.steps == 1) {
        /* ATen: fill_(start), or fill_(pow(base, start)) */
        od_value v = p.log ? od_double(pow(p.base, p.start)) : s->args[0];
        od_value a[2] = {od_tensor_v(out), v};
        od_stack fs;
        if ((st = od_call_builtin(OD_OPID_fill__Scalar, a, 2, &fs, err))) {
            od_tensor_release(out);
            return st;
        }
        od_stack_release_rets(&fs);
    } else if (p.steps > 1) {
        if (p.log)
            logspace_fill(&p, od_tensor_data(out));
        else if ((st = linspace_fill(&p, od_tensor_data(out)))) {
            od_tensor_release(out);
            return st;
        }
    }
    return ret1(s, out);
}

/* ---- tril_indices, triu_indices ----------------------------------------------------------- */

/* tril_indices / triu_indices a row at a time, the rows split across the
 * pool: row r's entries are one run of columns [c0, c1) beside r. ATen's
 * single loop (od_tri_indices_fill) took 1.0 ms for 2000 x 2000 against
 * torch's 0.88. Taken only where ATen's int32 / int64 counters cannot wrap
 * (sizes and offset within 2^30); elsewhere that loop runs, as ATen's. */
typedef struct tri_job {
    const od_tri_indices_params *p;
    int64_t r0;
    const int64_t *start; /* each row's first entry in the output */
    void *data;
} tri_job;

static void tri_run(const od_tri_indices_params *p, int64_t r, int64_t *c0, int64_t *c1)
{
    *c0 = p->upper ? (r + p->offset > 0 ? r + p->offset : 0) : 0;
    *c1 = p->upper ? p->col : (r + p->offset + 1 < p->col ? r + p->offset + 1 : p->col);
    if (*c1 < *c0)
        *c1 = *c0;
}

#define TRI_ROWS_(T)                                                                \
    {                                                                               \
        T *rows = j->data, *cols = rows + j->p->count;                              \
        for (int64_t k = b; k < e; k++) {                                           \
            int64_t r = j->r0 + k, c0, c1, i = j->start[k];                         \
            tri_run(j->p, r, &c0, &c1);                                             \
            for (int64_t q = 0; q < c1 - c0; q++) {                                 \
                rows[i + q] = (T)r;                                                 \
                cols[i + q] = (T)(c0 + q);                                          \
            }                                                                       \
        }                                                                           \
    }
OD_CPU_CLONES static void tri_rows(void *ctx, int64_t b, int64_t e)
{
    const tri_job *j = ctx;
    if (j->p->dtype == OD_INT32)
        TRI_ROWS_(int32_t)
    else
        TRI_ROWS_(int64_t)
}
#undef TRI_ROWS_

/* false where the rows' loop does not apply (wrapping counters, no memory) */
static bool tri_parallel(const od_tri_indices_params *p, void *data)
{
    const int64_t lim = (int64_t)1 << 30;
    if (p->row > lim || p->col > lim || p->offset > lim || p->offset < -lim)
        return false;
    int64_t r0 = p->upper || p->offset >= 0 ? 0 : -p->offset, nr = p->row - r0;
    int64_t *start = malloc(sizeof(int64_t) * (size_t)(nr > 0 ? nr : 1));
    if (!start)
        return false;
    int64_t k = 0, total = 0;
    for (; k < nr && total < p->count; k++) {
        int64_t c0, c1;
        tri_run(p, r0 + k, &c0, &c1);
        start[k] = total;
        total += c1 - c0;
    }
    bool ok = total == p->count; /* the runs cover ATen's entries exactly */
    if (ok) {
        tri_job j = {.p = p, .r0 = r0, .start = start, .data = data};
        if (od_parallel_for(k, 32768 / (p->col + 1) + 1, tri_rows, &j) != OD_OK)
            tri_rows(&j, 0, k);
    }
    free(start);
    return ok;
}

od_status od_cpu_tri_indices(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tri_indices_params p;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_tri_indices_params_of(id, s, &p, err)) || (st = alloc1(od_shape_tri_indices, id, s, &out, err)))
        return st;
    if (p.count > 0 && !tri_parallel(&p, od_tensor_data(out)))
        od_tri_indices_fill(&p, od_tensor_data(out));
    return ret1(s, out);
}

/* ---- _local_scalar_dense ------------------------------------------------------------------ */

od_status od_cpu_local_scalar(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)op;
    (void)ks;
    if (s->nargs != 1 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "_local_scalar_dense(): argument 'self' must be a Tensor");
    od_tensor *t = s->args[0].u.t;
    size_t es = od_dtype_size(t->dtype);
    /* an empty view of a non-empty storage (an expand to size 0): ATen reads
     * the element at its offset all the same */
    if (od_tensor_numel(t) == 0 && !(t->storage && (size_t)t->offset * es + es <= t->storage->nbytes))
        return od_error_set(err, OD_EINVAL, "_local_scalar_dense(): cannot read a Scalar from a tensor with no "
                                            "elements");
    s->rets[0] = od_cpu_load_value(od_tensor_data(t), t->dtype);
    s->nrets = 1;
    return OD_OK;
}
