/* scatter.c — CPU gather, scatter (src / value / reduce), scatter_add and
 * scatter_reduce.two.
 *
 * Invariants: od_scatter_parse (kernels/shape_index.c) has checked ranks,
 * sizes, dtypes and the reduce name. Every index value is checked before
 * it is used, so a bad index is an error, never an access outside self
 * (gather and the fast scatters check as they write into the fresh
 * result, which is released on the error; the others check the whole index
 * first). Index positions are visited in row-major order, so the contributions
 * to one element of the result are combined in the order of their index
 * along dim, as ATen's CPU kernel does (which fixes float rounding). Values
 * are combined in the dtype's compute family (float for float16, bfloat16
 * and float32, as c10::Half arithmetic rounds each step; double; int64 with
 * wraparound for integers and bool) and stored back after each step.
 * gather writes each output element once, so it runs on the worker pool;
 * scatter stays serial (its order is the rounding). The common scatters
 * (plain, and sums of float32/float64/int64) have typed loops
 * (scatter_fast) that compute exactly what the general loop does.
 */
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

#define GATHER_GRAIN 16384 /* positions per parallel task, at least */

typedef enum { FAM_I64, FAM_F32, FAM_F64 } fam;

static fam fam_of(od_dtype dt)
{
    return dt == OD_FLOAT64 ? FAM_F64
           : (dt == OD_FLOAT32 || dt == OD_FLOAT16 || dt == OD_BFLOAT16) ? FAM_F32
                                                                         : FAM_I64;
}

static void st_i(char *p, od_dtype dt, int64_t v)
{
    switch (dt) {
    case OD_BOOL: *(bool *)p = v != 0; break;
    case OD_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case OD_INT8: *(int8_t *)p = (int8_t)(uint8_t)v; break;
    case OD_INT16: *(int16_t *)p = (int16_t)(uint16_t)v; break;
    case OD_INT32: *(int32_t *)p = (int32_t)(uint32_t)v; break;
    default: *(int64_t *)p = v; break;
    }
}

/* v: a float value for the float32 family (exact in double), else a double. */
static void st_f(char *p, od_dtype dt, double v)
{
    switch (dt) {
    case OD_FLOAT16: *(uint16_t *)p = od_float_to_half((float)v); break;
    case OD_BFLOAT16: *(uint16_t *)p = od_float_to_bf16((float)v); break;
    case OD_FLOAT32: *(float *)p = (float)v; break;
    default: *(double *)p = v; break;
    }
}

/* One combine per floating family: float rounds each step as c10::Half and
 * float32 arithmetic do, double for float64. */
#define COMB_FLOAT_(name, T)                                           \
    static T name(T a, T b, od_scatter_reduce r)                       \
    {                                                                  \
        switch (r) {                                                   \
        case OD_SCR_SUM:                                               \
        case OD_SCR_MEAN: return a + b;                                \
        case OD_SCR_PROD: return a * b;                                \
        case OD_SCR_AMAX: return isnan(b) ? b : (a < b ? b : a);       \
        case OD_SCR_AMIN: return isnan(b) ? b : (b < a ? b : a);       \
        default: return b;                                             \
        }                                                              \
    }
COMB_FLOAT_(comb_f32, float)
COMB_FLOAT_(comb_f64, double)
#undef COMB_FLOAT_

static int64_t comb_i64(int64_t a, int64_t b, od_scatter_reduce r)
{
    switch (r) {
    case OD_SCR_SUM:
    case OD_SCR_MEAN: return (int64_t)((uint64_t)a + (uint64_t)b);
    case OD_SCR_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);
    case OD_SCR_AMAX: return a < b ? b : a;
    case OD_SCR_AMIN: return b < a ? b : a;
    default: return b;
    }
}

/* *dst = *dst (r) *src, both of dtype dt. */
static void combine(char *dst, const char *src, od_dtype dt, od_scatter_reduce r)
{
    switch (fam_of(dt)) {
    case FAM_F32: st_f(dst, dt, comb_f32((float)od_cpu_load_f64(dst, dt), (float)od_cpu_load_f64(src, dt), r)); break;
    case FAM_F64: st_f(dst, dt, comb_f64(od_cpu_load_f64(dst, dt), od_cpu_load_f64(src, dt), r)); break;
    default: st_i(dst, dt, comb_i64(od_cpu_load_i64(dst, dt), od_cpu_load_i64(src, dt), r)); break;
    }
}

/* The identity scatter_reduce(include_self=False) starts a target from. */
static void identity_of(od_scatter_reduce r, od_dtype dt, char *buf)
{
    if (fam_of(dt) != FAM_I64) {
        st_f(buf, dt, r == OD_SCR_PROD ? 1.0 : r == OD_SCR_AMAX ? -INFINITY : r == OD_SCR_AMIN ? INFINITY : 0.0);
        return;
    }
    static const int64_t lo[] = {[OD_BOOL] = 0, [OD_UINT8] = 0, [OD_INT8] = INT8_MIN, [OD_INT16] = INT16_MIN,
                                 [OD_INT32] = INT32_MIN, [OD_INT64] = INT64_MIN};
    static const int64_t hi[] = {[OD_BOOL] = 1, [OD_UINT8] = UINT8_MAX, [OD_INT8] = INT8_MAX,
                                 [OD_INT16] = INT16_MAX, [OD_INT32] = INT32_MAX, [OD_INT64] = INT64_MAX};
    st_i(buf, dt, r == OD_SCR_PROD ? 1 : r == OD_SCR_AMAX ? lo[dt] : r == OD_SCR_AMIN ? hi[dt] : 0);
}

/* out[pos] / count as ATen's mean does: count is first cast to the result's
 * dtype (it wraps in narrow integers, and 0 becomes 1); integers divide
 * with floor. */
static void mean_divide(char *p, od_dtype dt, int64_t count)
{
    char cbuf[8];
    if (fam_of(dt) == FAM_I64) {
        st_i(cbuf, dt, count);
        int64_t c = od_cpu_load_i64(cbuf, dt), a = od_cpu_load_i64(p, dt);
        if (c == 0)
            c = 1;
        int64_t q;
        if (c == -1) {
            q = (int64_t)(0 - (uint64_t)a);
        } else {
            q = a / c;
            if ((a % c != 0) && ((a < 0) != (c < 0)))
                q--;
        }
        st_i(p, dt, q);
    } else if (fam_of(dt) == FAM_F32) {
        st_f(cbuf, dt, (double)(float)count);
        float c = (float)od_cpu_load_f64(cbuf, dt);
        st_f(p, dt, (float)od_cpu_load_f64(p, dt) / (c == 0 ? 1.0f : c));
    } else {
        double c = (double)count;
        st_f(p, dt, od_cpu_load_f64(p, dt) / (c == 0 ? 1.0 : c));
    }
}

/* Row-major walk over the index's positions, keeping the element offsets
 * of the index (io), of src (so) and of the result's slot with dim left out
 * (oo) up to date as it steps. */
typedef struct walk {
    int nd, dim;
    int64_t sizes[OD_MAX_DIMS];
    int64_t istr[OD_MAX_DIMS], sstr[OD_MAX_DIMS], ostr[OD_MAX_DIMS];
    int64_t coord[OD_MAX_DIMS];
    int64_t io, so, oo;
} walk;

/* Places w at row-major position lin. */
static void walk_seek(walk *w, int64_t lin)
{
    w->io = w->so = w->oo = 0;
    for (int k = w->nd - 1; k >= 0; k--) {
        int64_t c = w->sizes[k] > 0 ? lin % w->sizes[k] : 0;
        lin = w->sizes[k] > 0 ? lin / w->sizes[k] : 0;
        w->coord[k] = c;
        w->io += c * w->istr[k];
        w->so += c * w->sstr[k];
        if (k != w->dim)
            w->oo += c * w->ostr[k];
    }
}

static inline void walk_next(walk *w)
{
    for (int k = w->nd - 1; k >= 0; k--) {
        int64_t ostr = k != w->dim ? w->ostr[k] : 0;
        w->io += w->istr[k];
        w->so += w->sstr[k];
        w->oo += ostr;
        if (++w->coord[k] < w->sizes[k])
            return;
        w->io -= w->istr[k] * w->sizes[k];
        w->so -= w->sstr[k] * w->sizes[k];
        w->oo -= ostr * w->sizes[k];
        w->coord[k] = 0;
    }
}

/* The first position (row-major) whose index is out of range, or -1. */
static int64_t first_bad(const od_scatter_info *info, walk w, const int64_t *iv, int64_t n, int64_t *bad)
{
    int64_t size = info->self->ndim > 0 ? info->self->sizes[info->dim] : 1;
    walk_seek(&w, 0);
    for (int64_t k = 0; k < n; k++, walk_next(&w)) {
        if (iv[w.io] < 0 || iv[w.io] >= size) {
            *bad = iv[w.io];
            return k;
        }
    }
    return -1;
}

/* gather: out (contiguous) [k] = self[oo + index * dstride], chunks of
 * positions in parallel (each output element is written once). Each index
 * is checked as it is read; a bad one is skipped and the lowest bad
 * position kept in first_bad, so the caller reports the one a serial pass
 * would (the result, fresh, is released on that error). */
typedef struct gather_job {
    walk w;
    const int64_t *iv;
    const char *sd;
    char *od;
    int64_t dstride, size;
    size_t es;
    _Atomic int64_t first_bad; /* INT64_MAX: none */
} gather_job;

/* One line of the index's last dim at a time, a tight loop over it (the
 * walk carries between lines only). */
#define GATHER_LOOP_(T)                                                                                  \
    for (int64_t k = b; k < e;) {                                                                        \
        int64_t run = inner - *col < e - k ? inner - *col : e - k;                                       \
        const int64_t *ix = j->iv + w.io;                                                                \
        const T *sp = (const T *)j->sd + w.oo;                                                           \
        T *o = (T *)j->od + k;                                                                           \
        for (int64_t i = 0; i < run; i++) {                                                              \
            int64_t x = ix[i * is];                                                                      \
            if ((uint64_t)x >= (uint64_t)j->size) {                                                      \
                od_atomic_min_i64(&j->first_bad, k + i);                                                                    \
                continue;                                                                                \
            }                                                                                            \
            o[i] = sp[i * os + x * j->dstride];                                                          \
        }                                                                                                \
        k += run;                                                                                        \
        *col += run - 1; /* at the line's last position, from where walk_next carries */                 \
        w.io += (run - 1) * is;                                                                          \
        w.so += (run - 1) * ss;                                                                          \
        w.oo += (run - 1) * os;                                                                          \
        walk_next(&w);                                                                                   \
    }

static void gather_chunk(void *ctx, int64_t b, int64_t e)
{
    gather_job *j = ctx;
    walk w = j->w;
    walk_seek(&w, b);
    const int last = w.nd - 1;
    int64_t none = 0, *col = w.nd > 0 ? &w.coord[last] : &none; /* a 0-dim index: one line of one */
    const int64_t inner = w.nd > 0 ? w.sizes[last] : 1, is = w.nd > 0 ? w.istr[last] : 0,
                  ss = w.nd > 0 ? w.sstr[last] : 0, os = w.nd > 0 && last != w.dim ? w.ostr[last] : 0;
    switch (j->es) {
    case 1: GATHER_LOOP_(uint8_t) break;
    case 2: GATHER_LOOP_(uint16_t) break;
    case 4: GATHER_LOOP_(uint32_t) break;
    default: GATHER_LOOP_(uint64_t) break;
    }
}
#undef GATHER_LOOP_

/* Along a contiguous last dim the destination is o + x: no multiply on
 * the way from the index to the address the random load waits for (1e6
 * float32 scatter_add: 0.68 ms, against 0.94 with the strides). */
static bool scatter_unit(const walk *w, bool from_src, int64_t dstride)
{
    const int last = w->nd - 1;
    const int64_t is = w->nd > 0 ? w->istr[last] : 0, ss = w->nd > 0 ? w->sstr[last] : 0;
    const int64_t os = w->nd > 0 && last != w->dim ? w->ostr[last] : 0;
    return from_src && is == 1 && ss == 1 && os == 0 && dstride == 1;
}

/* scatter's common cases without the per-element dtype switch: the plain
 * write (any dtype), and the sum (wrapping for int64), product, amax and
 * amin of float32, float64 and int64.
 * Serial and in row-major order, as the general loop, one tight loop per
 * line of the index's last dim. Each index is checked as it is read (size:
 * self's along dim), so no separate pass over the index is needed: the
 * result is a fresh tensor that the caller releases on an error, and the
 * first bad position is the one first_bad would find. Returns -2 where it
 * does not serve the case, -1 when done, else the bad position (its value
 * in *badv). Along a unit line (scatter_unit) only destinations x in [lo,
 * hi) are written, the others going to a dummy without a branch, so parts
 * of the range can run in parallel, each reading every index in order
 * (scatter_ranges); elsewhere lo and hi are 0 and size. */
static int64_t scatter_fast(walk w, const int64_t *iv, int64_t n, char *od, const char *sd, bool from_src,
                            int64_t dstride, int64_t size, od_dtype dt, od_scatter_reduce r, int64_t lo,
                            int64_t hi, int64_t *badv)
{
    size_t es = od_dtype_size(dt);
    const int last = w.nd - 1;
    const int64_t inner = w.nd > 0 ? w.sizes[last] : 1;
    const int64_t is = w.nd > 0 ? w.istr[last] : 0, ss = w.nd > 0 ? w.sstr[last] : 0;
    const int64_t os = w.nd > 0 && last != w.dim ? w.ostr[last] : 0;
    const uint64_t span = (uint64_t)(hi - lo);
    walk outer = w; /* the lines: every dim but the last */
    outer.nd = w.nd > 0 ? w.nd - 1 : 0;
    walk_seek(&outer, 0);
    const bool unit = scatter_unit(&w, from_src, dstride);
#define FAST_INNER_(T, STMT, IX, DST, V)                                                         \
    for (int64_t j = 0; j < inner; j++) {                                                        \
        const int64_t x = ix[IX];                                                                \
        if ((uint64_t)x >= (uint64_t)size) {                                                     \
            *badv = x;                                                                           \
            return row + j;                                                                      \
        }                                                                                        \
        T *dst = DST;                                                                            \
        const T v = sp[V];                                                                       \
        STMT;                                                                                    \
    }
#define FAST_LOOP_(T, STMT)                                                                      \
    {                                                                                            \
    T dummy_ = 0;                                                                                \
    for (int64_t row = 0; row < n; row += inner, walk_next(&outer)) {                            \
        const int64_t *ix = iv + outer.io;                                                       \
        T *o = (T *)od + outer.oo;                                                               \
        const T *sp = from_src ? (const T *)sd + outer.so : (const T *)sd;                       \
        const int64_t sst = from_src ? ss : 0;                                                   \
        if (unit)                                                                                \
            FAST_INNER_(T, STMT, j, (uint64_t)(x - lo) < span ? o + x : &dummy_, j)              \
        else                                                                                     \
            FAST_INNER_(T, STMT, j * is, o + j * os + x * dstride, j * sst)                      \
    }                                                                                            \
    return -1;                                                                                   \
    }
    if (r == OD_SCR_NONE) {
        switch (es) {
        case 1: FAST_LOOP_(uint8_t, *dst = v)
        case 2: FAST_LOOP_(uint16_t, *dst = v)
        case 4: FAST_LOOP_(uint32_t, *dst = v)
        default: FAST_LOOP_(uint64_t, *dst = v)
        }
    }
    if (r == OD_SCR_SUM) {
        switch (dt) {
        case OD_FLOAT32: FAST_LOOP_(float, *dst += v)
        case OD_FLOAT64: FAST_LOOP_(double, *dst += v)
        case OD_INT64: FAST_LOOP_(uint64_t, *dst += v)
        default: break;
        }
    }
    /* the general loop's combines, inlined with r constant */
#define COMB_CASES_(T, F)                                                                        \
    switch (r) {                                                                                 \
    case OD_SCR_PROD: FAST_LOOP_(T, *dst = F(*dst, v, OD_SCR_PROD))                              \
    case OD_SCR_AMAX: FAST_LOOP_(T, *dst = F(*dst, v, OD_SCR_AMAX))                              \
    default: FAST_LOOP_(T, *dst = F(*dst, v, OD_SCR_AMIN))                                       \
    }
    if (r == OD_SCR_PROD || r == OD_SCR_AMAX || r == OD_SCR_AMIN) {
        switch (dt) {
        case OD_FLOAT32: COMB_CASES_(float, comb_f32)
        case OD_FLOAT64: COMB_CASES_(double, comb_f64)
        case OD_INT64: COMB_CASES_(int64_t, comb_i64)
        default: break;
        }
    }
#undef COMB_CASES_
#undef FAST_LOOP_
#undef FAST_INNER_
    return -2;
}

/* scatter_fast over one line of at least SR_MIN_N indices, the pool's
 * threads each writing a part of the destinations: each part reads every
 * index in order, so each destination sees its updates in ATen's order
 * (the last write wins, combines in sequence), and each part meets the
 * same first bad index, if any. Returns as scatter_fast. */
#define SR_MIN_N ((int64_t)1 << 16)
#define SR_MAX_PARTS 64

typedef struct sr_ctx {
    walk w;
    const int64_t *iv;
    int64_t n, size, dstride, parts;
    char *od;
    const char *sd;
    od_dtype dt;
    od_scatter_reduce r;
    int64_t ret[SR_MAX_PARTS], badv[SR_MAX_PARTS]; /* each part's scatter_fast */
} sr_ctx;

static void sr_part(void *ctx, int64_t b, int64_t e)
{
    sr_ctx *c = ctx;
    for (int64_t p = b; p < e; p++) {
        int64_t lo = c->size * p / c->parts, hi = c->size * (p + 1) / c->parts;
        c->ret[p] = scatter_fast(c->w, c->iv, c->n, c->od, c->sd, true, c->dstride, c->size, c->dt, c->r, lo, hi,
                                 &c->badv[p]);
    }
}

static int64_t scatter_ranges(walk w, const int64_t *iv, int64_t n, char *od, const char *sd, bool from_src,
                              int64_t dstride, int64_t size, od_dtype dt, od_scatter_reduce r, int64_t *badv)
{
    int threads = od_get_num_threads();
    if (w.nd != 1 || n < SR_MIN_N || threads < 2 || !scatter_unit(&w, from_src, dstride))
        return scatter_fast(w, iv, n, od, sd, from_src, dstride, size, dt, r, 0, size, badv);
    sr_ctx c = {.w = w, .iv = iv, .n = n, .size = size, .dstride = dstride,
                .parts = threads < SR_MAX_PARTS ? threads : SR_MAX_PARTS, .od = od, .sd = sd, .dt = dt, .r = r};
    for (int64_t p = 0; p < c.parts; p++)
        c.ret[p] = -1; /* a part a deadline skipped: the call's answer is dropped */
    od_parallel_for(c.parts, 1, sr_part, &c); /* its arguments are valid: it returns OD_OK */
    for (int64_t p = 0; p < c.parts; p++)
        if (c.ret[p] != -1) {
            *badv = c.badv[p];
            return c.ret[p];
        }
    return -1;
}

od_status od_cpu_scatter(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_scatter_info info;
    od_status st;
    if ((st = od_shape_scatter(id, s, &spec, &nouts, err)) || (st = od_scatter_parse(id, s, &info, err)))
        return st;
    const od_tensor *self = info.self, *index = info.index, *src = info.src;
    od_dtype dt = self->dtype;
    size_t es = od_dtype_size(dt);
    int64_t n = od_tensor_numel(index);
    od_tensor *out = NULL;
    /* gather writes every element (or fails); scatter starts from a copy of
     * self, which writes every byte before anything reads one */
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        return st;
    if (!info.gather && (st = od_cpu_copy_into(out, self, err)))
        goto fail;
    if (n == 0) {
        /* ATen's mean still divides by a count of ones: nothing changes,
         * but bool has no floor division */
        if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL) {
            st = od_error_set(err, OD_EUNSUPPORTED, "\"div_floor_cpu\" not implemented for 'Bool'");
            goto fail;
        }
        s->rets[0] = od_tensor_v(out);
        s->nrets = 1;
        return OD_OK;
    }
    if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL && info.include_self) {
        st = od_error_set(err, OD_EUNSUPPORTED,
                          "\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'");
        goto fail;
    }
    walk w;
    memset(&w, 0, sizeof w);
    w.nd = index->ndim;
    w.dim = info.dim;
    int64_t ocontig[OD_MAX_DIMS];
    for (int64_t k = out->ndim - 1, acc = 1; k >= 0; k--) {
        ocontig[k] = acc;
        acc *= out->sizes[k];
    }
    for (int k = 0; k < w.nd; k++) {
        w.sizes[k] = index->sizes[k];
        w.istr[k] = index->strides[k];
        w.sstr[k] = src && k < src->ndim ? src->strides[k] : 0;
        /* gather reads self (strided); scatter writes the contiguous result */
        w.ostr[k] = info.gather ? (k < self->ndim ? self->strides[k] : 0) : (k < out->ndim ? ocontig[k] : 0);
    }
    int64_t dstride = info.gather ? (self->ndim > 0 ? self->strides[info.dim] : 0)
                                  : (out->ndim > 0 ? ocontig[info.dim] : 0);
    const int64_t *iv = (const int64_t *)od_tensor_data(index);
    int64_t size = self->ndim > 0 ? self->sizes[info.dim] : 1, badv = 0;
    if (!info.gather && src && info.include_self) {
        /* the fast loops check the index as they go (a value scatter checks
         * first: whether its value converts depends on the first bad position) */
        int64_t fb = scatter_ranges(w, iv, n, od_tensor_data(out), od_tensor_data(src), true,
                                    out->ndim > 0 ? ocontig[info.dim] : 0, size, dt, info.reduce, &badv);
        if (fb >= 0) {
            st = od_scatter_check_index(&info, badv, err);
            goto fail;
        }
        if (fb == -1) {
            s->rets[0] = od_tensor_v(out);
            s->nrets = 1;
            return OD_OK;
        }
    }
    if (info.gather) {
        gather_job j = {.w = w, .iv = iv, .sd = od_tensor_data(self), .od = od_tensor_data(out), .dstride = dstride,
                        .size = size, .es = es, .first_bad = INT64_MAX};
        if ((st = od_parallel_for(n, GATHER_GRAIN, gather_chunk, &j)))
            goto fail;
        int64_t fb = atomic_load(&j.first_bad);
        if (fb != INT64_MAX) {
            walk_seek(&w, fb);
            st = od_scatter_check_index(&info, iv[w.io], err);
            goto fail;
        }
        s->rets[0] = od_tensor_v(out);
        s->nrets = 1;
        return OD_OK;
    }
    int64_t bad = first_bad(&info, w, iv, n, &badv);
    char vbuf[8] = {0};
    if (!info.gather && !src) {
        /* ATen converts the value when it writes the first element */
        if (bad != 0 && (st = od_scalar_check_fits(&info.value, dt, err)))
            goto fail;
        od_cpu_scalar_to_dtype(&info.value, dt, vbuf);
    }
    if (bad >= 0) {
        st = od_scatter_check_index(&info, badv, err);
        goto fail;
    }
    if (info.reduce == OD_SCR_MEAN && dt == OD_BOOL) {
        st = od_error_set(err, OD_EUNSUPPORTED,
                          "\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'");
        goto fail;
    }
    char *od = od_tensor_data(out);
    const char *sd = src ? od_tensor_data(src) : vbuf;
    if (info.include_self &&
        scatter_ranges(w, iv, n, od, sd, src != NULL, dstride, size, dt, info.reduce, &badv) == -1) {
        s->rets[0] = od_tensor_v(out);
        s->nrets = 1;
        return OD_OK;
    }
    int64_t *count = NULL;
    if (info.reduce == OD_SCR_MEAN) {
        count = calloc((size_t)od_tensor_numel(out), sizeof *count);
        if (!count) {
            st = od_error_set(err, OD_ENOMEM, "out of memory counting scatter_reduce's contributions");
            goto fail;
        }
    }
    if (!info.include_self) {
        char ibuf[8];
        identity_of(info.reduce, dt, ibuf);
        walk w0 = w;
        walk_seek(&w0, 0);
        for (int64_t k = 0; k < n; k++, walk_next(&w0))
            memcpy(od + (w0.oo + iv[w0.io] * dstride) * (int64_t)es, ibuf, es);
    }
    walk_seek(&w, 0);
    for (int64_t k = 0; k < n; k++, walk_next(&w)) {
        int64_t pos = w.oo + iv[w.io] * dstride;
        combine(od + pos * (int64_t)es, src ? sd + w.so * (int64_t)es : vbuf, dt, info.reduce);
        if (count)
            count[pos]++;
    }
    if (count) {
        int64_t total = od_tensor_numel(out);
        for (int64_t p = 0; p < total; p++)
            if (count[p])
                mean_divide(od + p * (int64_t)es, dt, count[p] + (info.include_self ? 1 : 0));
        free(count);
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
fail:
    od_tensor_release(out);
    return st;
}
