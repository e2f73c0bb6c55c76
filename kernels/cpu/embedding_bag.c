/* embedding_bag.c — _embedding_bag, _embedding_bag_forward_only,
 * _embedding_bag_dense_backward and _embedding_bag_per_sample_weights_backward
 * on the CPU.
 *
 * Invariants: od_embag_plan_of (shape_embedding_bag.c) checked shapes and
 * dtypes, od_embag_check_data the offsets and indices (before anything is
 * written). Inputs are read through their strides; outputs are new and
 * contiguous. Bag b holds indices [offsets[b], offsets[b + 1]) (the last,
 * without include_last_offset, runs to the end); padding_idx takes no part.
 * Sums run in float for float32 / float16 (fbgemm's accumulator) and in
 * double for float64, in index order; 'mean' divides the sum once; 'max'
 * keeps the first maximum (strict >, as torch). The forward splits bags
 * across od_parallel_for (each writes only its own rows); the dense
 * backward splits the feature dim, so rows never race.
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_half.h"
#include "od_parallel.h"
#include "od_shape.h"

typedef struct eb_ctx {
    const od_embag_plan *p;
    const int64_t *idx, *off, *o2b; /* host copies as int64 */
    const int64_t *bsz, *maxi;      /* dense backward: bag_size, max_indices (contiguous int64 copies) */
    const double *psw;              /* per-sample weights as double, or NULL */
    const int64_t *counts;          /* scale_grad_by_freq: occurrences per weight row */
    const char *w;                  /* weight (forward) or grad (backward), strided */
    int64_t ws0, ws1;
    char *out;                      /* output 0 */
    void *acc;                      /* forward: the accumulator rows, output 0 itself unless float16 */
    int64_t *o_bsz, *o_max;         /* forward: bag_size, max_indices (int64 scratch) */
    bool sum512;                    /* forward: float32 sum / mean of unit-stride rows on AVX-512 */
} eb_ctx;

static inline double ld(const char *base, od_dtype dt, int64_t at)
{
    switch (dt) {
    case OD_FLOAT32: return ((const float *)base)[at];
    case OD_FLOAT64: return ((const double *)base)[at];
    case OD_BFLOAT16: return od_bf16_to_float(((const uint16_t *)base)[at]);
    default: return od_half_to_float(((const uint16_t *)base)[at]);
    }
}

static inline void st(char *base, od_dtype dt, int64_t at, double v)
{
    switch (dt) {
    case OD_FLOAT32: ((float *)base)[at] = (float)v; break;
    case OD_FLOAT64: ((double *)base)[at] = v; break;
    case OD_BFLOAT16: ((uint16_t *)base)[at] = od_double_to_bf16(v); break;
    default: ((uint16_t *)base)[at] = od_float_to_half((float)v); break;
    }
}

/* v rounded to dt, as c10::Half and c10::BFloat16 arithmetic rounds each result */
static inline double in_dtype(od_dtype dt, double v)
{
    double h; /* room for any dtype st writes */
    st((char *)&h, dt, 0, v);
    return ld((const char *)&h, dt, 0);
}

static inline int64_t bag_end(const eb_ctx *c, int64_t b)
{
    const od_embag_plan *p = c->p;
    return b + 1 < p->offsets->sizes[0] ? c->off[b + 1] : p->n;
}

/* acc[d] += r[d]: distinct memory (a row of the weight, one of the output),
 * which restrict lets gcc vectorise */
typedef float eb_v4 __attribute__((vector_size(16)));
static inline void add_row_f32(float *restrict acc, const float *restrict r, int64_t D)
{
    int64_t d = 0;
    for (; d + 8 <= D; d += 8) { /* two 4-wide adds per step; memcpy: no alignment assumed */
        eb_v4 a0, a1, r0, r1;
        memcpy(&a0, acc + d, 16);
        memcpy(&a1, acc + d + 4, 16);
        memcpy(&r0, r + d, 16);
        memcpy(&r1, r + d + 4, 16);
        a0 += r0;
        a1 += r1;
        memcpy(acc + d, &a0, 16);
        memcpy(acc + d + 4, &a1, 16);
    }
    for (; d < D; d++)
        acc[d] += r[d];
}

/* the rows are random ones: ask for a row a few indices ahead, every cache line of it */
static inline void prefetch_row(const float *r, int64_t D)
{
    for (int64_t d = 0; d < D; d += 16)
        __builtin_prefetch(r + d);
}

/* Rows this many indices ahead are prefetched: the table is far larger
 * than the caches and each row is a random one. 16 over 8: 3.8-3.9 ->
 * 3.3-3.4 ms on a 100000 x 128 table, 8192 bags of 32 (AMD EPYC, 2 threads);
 * 32 was no better. */
#define EB_AHEAD 16

/* float32 sum of bag b's rows (unit stride, no per-sample weights) into
 * acc[0, D), divided by their count for 'mean' (in the registers: a scalar
 * division pass over the output was a fifth of a 'mean' call); returns the
 * rows summed. Up to 128 columns at a time stay in eight registers across
 * the whole bag, so the accumulator is not loaded and stored per row (that, not memory, bounded the row-by-row loop: 2x
 * slower on a 100000 x 128 table). The k loops have a constant trip count
 * and are unrolled by pragma: gcc -O2 kept a loop over nk rolled, with a[]
 * on the stack, a store-to-load round trip per row and register. The
 * prefetch is unrolled too and its bound is a select, not a branch. With
 * both, 8192 bags of 32 from a 100000 x 128 table took 3.5 ms on one
 * thread, against 5.0 ms before and torch 1.13's 3.3 ms (AMD EPYC). A block
 * narrower than 128 masks the registers it does not use (a zero-mask load
 * reads nothing). Each lane adds in index order, as the scalar loop, so
 * the sums are the same bits. */
__attribute__((target("avx512f"))) static int64_t bag_sum_f32_512(const eb_ctx *c, int64_t b, float *acc)
{
    const od_embag_plan *p = c->p;
    const float *w = (const float *)(const void *)c->w;
    const int64_t *idx = c->idx;
    const int64_t D = p->D, ws0 = c->ws0, n = p->n, pad = p->padding_idx;
    int64_t i0 = c->off[b], i1 = bag_end(c, b), cnt = 0;
    for (int64_t d0 = 0; d0 < D; d0 += 128) {
        int64_t m = D - d0 < 128 ? D - d0 : 128;
        __mmask16 mk[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            int64_t left = m - 16 * k; /* columns of this block's register k */
            mk[k] = (__mmask16)(left >= 16 ? 0xffff : left > 0 ? (1u << left) - 1 : 0);
        }
        __m512 a[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++)
            a[k] = _mm512_setzero_ps();
        cnt = 0;
        for (int64_t i = i0; i < i1; i++) {
            /* the row EB_AHEAD on (this one at the end): no branch to mispredict. Written here, not as
             * prefetch_row: with this body there, gcc 12 -O2 dropped every prefetch of the file */
            if (d0 == 0) {
                const float *pf = w + idx[i + EB_AHEAD < n ? i + EB_AHEAD : i] * ws0;
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    if (16 * k < D)
                        __builtin_prefetch(pf + 16 * k);
                for (int64_t d = 128; d < D; d += 16)
                    __builtin_prefetch(pf + d);
            }
            int64_t v = idx[i];
            if (v == pad)
                continue;
            const float *r = w + v * ws0 + d0;
            if (m == 128) {
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    a[k] = _mm512_add_ps(a[k], _mm512_loadu_ps(r + 16 * k));
            } else {
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++)
                    a[k] = _mm512_add_ps(a[k], _mm512_maskz_loadu_ps(mk[k], r + 16 * k));
            }
            cnt++;
        }
        if (p->mode == OD_EMBAG_MEAN && cnt > 0) { /* ATen's output /= bag_size: the same correctly rounded quotient */
            __m512 q = _mm512_set1_ps((float)cnt);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                a[k] = _mm512_div_ps(a[k], q);
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++)
            _mm512_mask_storeu_ps(acc + d0 + 16 * k, mk[k], a[k]);
    }
    return cnt;
}

/* forward: bags [b0, b1). The accumulator type A is float unless float64. */
#define EB_FWD(NAME, A)                                                                                        \
    static void NAME(void *vc, int64_t b0, int64_t b1)                                                         \
    {                                                                                                          \
        const eb_ctx *c = vc;                                                                                  \
        const od_embag_plan *p = c->p;                                                                         \
        int64_t D = p->D;                                                                                      \
        for (int64_t b = b0; b < b1; b++) {                                                                    \
            A *acc = (A *)c->acc + b * D;                                                                      \
            int64_t cnt = 0;                                                                                   \
            if (c->sum512) /* the whole bag in registers; the row loop below is skipped */                    \
                cnt = bag_sum_f32_512(c, b, (float *)(void *)acc);                                             \
            else                                                                                               \
                for (int64_t d = 0; d < D; d++)                                                                \
                    acc[d] = 0;                                                                                \
            for (int64_t i = c->off[b], e = bag_end(c, b); !c->sum512 && i < e; i++) {                         \
                int64_t v = c->idx[i];                                                                         \
                if (v == p->padding_idx)                                                                       \
                    continue;                                                                                  \
                const char *row = c->w;                                                                        \
                int64_t r0 = v * c->ws0;                                                                       \
                if (p->mode == OD_EMBAG_MAX) {                                                                 \
                    for (int64_t d = 0; d < D; d++) {                                                          \
                        A x = (A)ld(row, p->dt, r0 + d * c->ws1);                                              \
                        if (cnt == 0 || x > acc[d]) {                                                          \
                            acc[d] = x;                                                                        \
                            c->o_max[b * D + d] = v;                                                           \
                        }                                                                                      \
                    }                                                                                          \
                } else if (p->dt == OD_FLOAT32 && c->ws1 == 1 && !c->psw) {                                    \
                    if (i + EB_AHEAD < p->n)                                                                   \
                        prefetch_row((const float *)row + c->idx[i + EB_AHEAD] * c->ws0, D);                   \
                    add_row_f32((float *)(void *)acc, (const float *)row + r0, D);                             \
                } else {                                                                                       \
                    A s = c->psw ? (A)c->psw[i] : (A)1;                                                        \
                    for (int64_t d = 0; d < D; d++)                                                            \
                        acc[d] += (A)ld(row, p->dt, r0 + d * c->ws1) * s;                                      \
                }                                                                                              \
                cnt++;                                                                                         \
            }                                                                                                  \
            if (p->mode == OD_EMBAG_MEAN && cnt > 0 && !c->sum512) /* bag_sum_f32_512 divided its registers */ \
                for (int64_t d = 0; d < D; d++)                                                                \
                    acc[d] /= (A)cnt;                                                                          \
            if ((void *)acc != (void *)(c->out + b * D * (int64_t)sizeof(A)))                                  \
                for (int64_t d = 0; d < D; d++)                                                                \
                    st(c->out, p->dt, b * D + d, (double)acc[d]);                                              \
            c->o_bsz[b] = p->mode == OD_EMBAG_SUM ? 0 : cnt;                                                   \
        }                                                                                                      \
    }
EB_FWD(fwd_float, float)
EB_FWD(fwd_double, double)

/* Copies a 1-D or 2-D index tensor (any strides, any integer dtype) into a new
 * contiguous int64 array; NULL on no memory (an empty tensor gives a
 * 1-element buffer, so NULL always means failure). */
static int64_t *to_i64(const od_tensor *t)
{
    int64_t n = od_tensor_numel(t);
    int64_t *o = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!o || n == 0)
        return o;
    const char *b = od_tensor_data(t);
    int64_t cols = t->ndim == 2 ? t->sizes[1] : n, s1 = t->ndim == 2 ? t->strides[1] : t->strides[0];
    for (int64_t r = 0, i = 0; i < n; r++)
        for (int64_t k = 0; k < cols; k++, i++) {
            int64_t at = r * t->strides[0] + k * s1;
            o[i] = od_embag_index_at(b, t->dtype, at);
        }
    return o;
}

/* An index tensor as contiguous int64: its own memory when it already is
 * (borrowed, *copy = NULL), else a to_i64 copy that *copy owns (the caller
 * frees it). NULL on no memory. Borrowing saves a pass and fresh pages over
 * the largest input after the table. */
static const int64_t *i64_of(const od_tensor *t, int64_t **copy)
{
    *copy = NULL;
    if (t->dtype == OD_INT64 && od_tensor_numel(t) > 0 && od_tensor_is_contiguous(t))
        return od_tensor_data(t);
    return *copy = to_i64(t);
}

static void store_idx(od_tensor *t, const int64_t *v, int64_t n)
{
    char *b = od_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        if (t->dtype == OD_INT32)
            ((int32_t *)b)[i] = (int32_t)v[i];
        else
            ((int64_t *)b)[i] = v[i];
    }
}

/* offset2bag[i]: how many offsets are <= i, minus 1 (torch's make_offset2bag
 * for non-decreasing offsets) */
static void fill_o2b(const int64_t *off, int64_t no, int64_t n, int64_t *o2b)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        while (k < no && off[k] <= i)
            k++;
        o2b[i] = k - 1;
    }
}

static double *psw_of(const od_tensor *t)
{
    int64_t n = od_tensor_numel(t);
    double *o = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!o)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        o[i] = ld(od_tensor_data(t), t->dtype, i * t->strides[0]);
    return o;
}

static od_status eb_forward(od_opid id, od_embag_plan *p, od_stack *s, od_error *err)
{
    od_out_spec spec[4];
    int nouts = 0;
    od_status stt;
    if ((stt = od_shape_embedding_bag(id, s, spec, &nouts, err)))
        return stt;
    od_tensor *outs[4] = {0};
    /* every element of the four is written below (empty bags included) */
    if ((stt = od_alloc_outputs_overwrite(s, spec, 4, outs, err)))
        return stt;
    eb_ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    int64_t *idx_copy, *off_copy, *o2b_copy = NULL;
    const int64_t *idx = i64_of(p->indices, &idx_copy), *off = i64_of(p->offsets, &off_copy);
    /* offset2bag is filled in place when it is int64 (always, unless both index inputs are int32);
     * the 'sum' fast path leaves it empty (od_shape_embedding_bag) */
    bool o2b_out = od_tensor_numel(outs[1]) > 0;
    int64_t *o2b = !o2b_out                        ? NULL
                   : outs[1]->dtype == OD_INT64 ? od_tensor_data(outs[1])
                                                : (o2b_copy = malloc(sizeof(int64_t) * (size_t)(p->n + 1)));
    int64_t *bsz = malloc(sizeof(int64_t) * (size_t)(p->nbags + 1));
    bool is_max = p->mode == OD_EMBAG_MAX;
    int64_t *mx = calloc((size_t)(is_max ? p->nbags * p->D + 1 : 1), sizeof(int64_t)); /* only 'max' fills it */
    double *psw = p->psw ? psw_of(p->psw) : NULL;
    bool f16 = p->dt == OD_FLOAT16;
    float *scratch = f16 ? malloc(sizeof(float) * (size_t)(p->nbags * p->D + 1)) : NULL;
    if (!idx || !off || (o2b_out && !o2b) || !bsz || !mx || (p->psw && !psw) || (f16 && !scratch)) {
        stt = od_error_set(err, OD_ENOMEM, "embedding_bag: no memory for the index tables");
        goto done;
    }
    c.idx = idx;
    c.off = off;
    c.psw = psw;
    c.w = od_tensor_data(p->weight);
    c.ws0 = p->weight->strides[0];
    c.ws1 = p->weight->strides[1];
    c.out = od_tensor_data(outs[0]);
    c.acc = f16 ? (void *)scratch : (void *)c.out;
    c.o_bsz = bsz;
    c.o_max = mx;
    __builtin_cpu_init();
    /* D > 0: bag_sum_f32_512 counts the rows in its column passes */
    c.sum512 = p->dt == OD_FLOAT32 && !is_max && c.ws1 == 1 && !psw && p->D > 0 && __builtin_cpu_supports("avx512f");
    if (p->nbags > 0) {
        int64_t per = (p->n / (p->nbags > 0 ? p->nbags : 1) + 1) * (p->D + 1);
        stt = od_parallel_for(p->nbags, 65536 / per + 1, p->dt == OD_FLOAT64 ? fwd_double : fwd_float, &c);
        if (stt)
            goto done;
    }
    if (o2b_out)
        fill_o2b(off, p->offsets->sizes[0], p->n, o2b);
    if (o2b_copy)
        store_idx(outs[1], o2b, p->n);
    store_idx(outs[2], bsz, p->nbags);
    store_idx(outs[3], is_max ? mx : bsz, is_max ? p->nbags * p->D : p->nbags);
done:
    free(idx_copy);
    free(off_copy);
    free(o2b_copy);
    free(bsz);
    free(mx);
    free(psw);
    free(scratch);
    if (stt) {
        for (int i = 0; i < 4; i++)
            od_tensor_release(outs[i]);
        return stt;
    }
    for (int i = 0; i < 4; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = 4;
    return OD_OK;
}

/* dense backward over feature columns [d0, d1) */
static void dense_cols(void *vc, int64_t d0, int64_t d1)
{
    const eb_ctx *c = vc;
    const od_embag_plan *p = c->p;
    double *gw = (double *)c->out; /* double scratch [V, D] */
    int64_t D = p->D;
    if (p->mode == OD_EMBAG_MAX) {
        for (int64_t b = 0; b < p->nbags; b++) {
            if (c->bsz[b] == 0)
                continue;
            for (int64_t d = d0; d < d1; d++)
                gw[c->maxi[b * D + d] * D + d] += ld(c->w, p->dt, b * c->ws0 + d * c->ws1);
        }
        return;
    }
    for (int64_t i = 0; i < p->n; i++) {
        int64_t v = c->idx[i], b = c->o2b[i];
        if (v == p->padding_idx)
            continue;
        double scale = c->psw ? c->psw[i] : 1.0;
        if (p->sgbf)
            scale /= (double)c->counts[v];
        if (p->mode == OD_EMBAG_MEAN && c->bsz[b] != 0)
            scale /= (double)c->bsz[b];
        for (int64_t d = d0; d < d1; d++)
            gw[v * D + d] += ld(c->w, p->dt, b * c->ws0 + d * c->ws1) * scale;
    }
}

static od_status eb_dense_backward(od_opid id, od_embag_plan *p, od_stack *s, od_error *err)
{
    od_out_spec spec[4];
    int nouts = 0;
    od_status stt;
    if ((stt = od_shape_embedding_bag(id, s, spec, &nouts, err)))
        return stt;
    od_tensor *out = NULL;
    if ((stt = od_alloc_outputs(s, spec, 1, &out, err)))
        return stt;
    eb_ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    int64_t *idx = to_i64(p->indices), *o2b = to_i64(p->offset2bag), *bsz = to_i64(p->bag_size);
    int64_t *maxi = to_i64(p->max_indices);
    int64_t *counts = p->sgbf ? calloc((size_t)(p->V + 1), sizeof(int64_t)) : NULL;
    double *psw = p->psw ? psw_of(p->psw) : NULL;
    double *gw = calloc((size_t)(p->V * p->D + 1), sizeof(double));
    if (!idx || !o2b || !bsz || !maxi || (p->sgbf && !counts) || (p->psw && !psw) || !gw) {
        stt = od_error_set(err, OD_ENOMEM, "_embedding_bag_dense_backward: no memory");
        goto done;
    }
    if (counts)
        for (int64_t i = 0; i < p->n; i++)
            counts[idx[i]]++;
    c.idx = idx;
    c.o2b = o2b;
    c.bsz = bsz;
    c.maxi = maxi;
    c.counts = counts;
    c.psw = psw;
    c.w = od_tensor_data(p->grad);
    c.ws0 = p->grad->strides[0];
    c.ws1 = p->grad->strides[1];
    c.out = (char *)gw;
    if (p->D > 0 && (stt = od_parallel_for(p->D, 1 + p->D / 16, dense_cols, &c)))
        goto done;
    for (int64_t i = 0; i < p->V * p->D; i++)
        st(od_tensor_data(out), p->dt, i, gw[i]);
done:
    free(idx);
    free(o2b);
    free(bsz);
    free(maxi);
    free(counts);
    free(psw);
    free(gw);
    if (stt) {
        od_tensor_release(out);
        return stt;
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}

static od_status eb_psw_backward(od_opid id, od_embag_plan *p, od_stack *s, od_error *err)
{
    od_out_spec spec[4];
    int nouts = 0;
    od_status stt;
    if ((stt = od_shape_embedding_bag(id, s, spec, &nouts, err)))
        return stt;
    od_tensor *out = NULL;
    if ((stt = od_alloc_outputs(s, spec, 1, &out, err)))
        return stt;
    int64_t *idx = to_i64(p->indices), *off = to_i64(p->offsets), *o2b = NULL;
    bool given = p->offset2bag->sizes[0] == p->n;
    o2b = given ? to_i64(p->offset2bag) : malloc(sizeof(int64_t) * (size_t)(p->n + 1));
    if (!idx || !off || !o2b) {
        stt = od_error_set(err, OD_ENOMEM, "_embedding_bag_per_sample_weights_backward: no memory");
        goto done;
    }
    if (!given)
        fill_o2b(off, p->offsets->sizes[0], p->n, o2b);
    const char *g = od_tensor_data(p->grad), *w = od_tensor_data(p->weight);
    bool narrow = p->dt == OD_FLOAT16 || p->dt == OD_BFLOAT16;
    for (int64_t i = 0; i < p->n; i++) {
        int64_t v = idx[i], b = o2b[i];
        double acc = 0;
        if (v != p->padding_idx && b >= 0 && b < p->nbags && v >= 0 && v < p->V)
            for (int64_t d = 0; d < p->D; d++) {
                double prod = ld(g, p->dt, b * p->grad->strides[0] + d * p->grad->strides[1]) *
                              ld(w, p->dt, v * p->weight->strides[0] + d * p->weight->strides[1]);
                acc = narrow ? in_dtype(p->dt, acc + in_dtype(p->dt, prod)) : acc + prod;
            }
        st(od_tensor_data(out), p->dt, i, acc);
    }
done:
    free(idx);
    free(off);
    free(o2b);
    if (stt) {
        od_tensor_release(out);
        return stt;
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}

od_status od_cpu_embedding_bag(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    (void)op;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_embag_plan p;
    od_status stt;
    if ((stt = od_embag_plan_of(id, s, &p, err)) || (stt = od_embag_check_data(&p, err)))
        return stt;
    switch (p.kind) {
    case OD_EMBAG_FWD: return eb_forward(id, &p, s, err);
    case OD_EMBAG_DENSE_BW: return eb_dense_backward(id, &p, s, err);
    default: return eb_psw_backward(id, &p, s, err);
    }
}
