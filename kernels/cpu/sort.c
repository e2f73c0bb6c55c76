/* sort.c — CPU sort, sort.stable, topk, kthvalue, median, nanmedian (whole
 * tensor and along a dim) and mode.
 *
 * Invariants:
 *  - od_shape_scan / od_scan_parse (kernels/shape_scan.c) validate every
 *    argument first; od_scan_check_dtype then refuses what ATen's CPU
 *    dispatch refuses. Outputs come from od_alloc_outputs (contiguous).
 *  - Each line along dim is gathered into (key, index) pairs and ordered by
 *    kernels/od_sort_algo.h (ATen 1.13's CPU algorithms replayed, so equal
 *    keys come out in torch's order); values are then copied byte for byte
 *    from self at the chosen indices, so NaN payloads and -0.0 survive.
 *  - Lines are split across the worker pool; each task owns its scratch.
 *  - The float lines of sort, topk and kthvalue are keyed by
 *    od_sort_key_f32 / _f64 (keyed): integer keys that compare as ATen's
 *    comparators compare the floats, so the algorithms take the same steps.
 *    The selections (median, nanmedian, mode) keep the doubles: they test
 *    for NaN and (mode) compare with a plain <.
 *  - topk's heap is offered exactly the pairs that beat its top, in line
 *    order; a contiguous float32 line finds them with AVX-512 compares of
 *    16 keys at a time (topk_next_f32_512), the rest one by one.
 */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"
#include "od_sort_algo.h"

#define SORT_GRAIN 16384 /* keys per parallel task, at least */

typedef struct sort_ctx {
    int op;          /* OD_SORT_OP_* */
    bool fl, desc, sorted;
    bool keyed;      /* float keys as od_sort_key_* (fl then false for the algorithms) */
    int64_t n, on, inner, k;
    size_t es;
    const char *x;   /* self, contiguous */
    const void *keys; /* self as double or int64, contiguous; or self itself, float32 (f32) */
    bool f32;
    char *v;
    int64_t *ix;
    int oom;         /* set (atomically) by a task whose scratch failed */
} sort_ctx;

static inline od_sort_elem pair_at(const sort_ctx *c, int64_t base, int64_t k)
{
    od_sort_elem e;
    int64_t at = base + k * c->inner;
    if (c->f32 && c->keyed)
        e.k.i = od_sort_key_f32(((const float *)c->keys)[at]);
    else if (c->f32) /* widened here: exact, as the double copy would be */
        e.k.d = ((const float *)c->keys)[at];
    else if (c->fl && c->keyed)
        e.k.i = od_sort_key_f64(((const double *)c->keys)[at]);
    else if (c->fl)
        e.k.d = ((const double *)c->keys)[at];
    else
        e.k.i = ((const int64_t *)c->keys)[at];
    e.idx = k;
    return e;
}

/* od_sort_line with desc and fl as constants where the keys are integers
 * (od_sort_algo.h inlines everything, so each call compiles its own
 * comparisons). */
static int64_t order_line(const sort_ctx *c, od_sort_elem *f, od_sort_elem *tmp)
{
    if (c->fl && !c->keyed)
        return od_sort_line(f, tmp, c->n, c->op, c->k, c->desc, c->sorted, true);
    if (c->desc)
        return od_sort_line(f, tmp, c->n, c->op, c->k, true, c->sorted, false);
    return od_sort_line(f, tmp, c->n, c->op, c->k, false, c->sorted, false);
}

static inline void topk_offer(const sort_ctx *c, od_sort_elem *heap, od_sort_elem e)
{
    if (c->desc)
        od_sort_topk_offer(heap, c->k, true, false, e);
    else
        od_sort_topk_offer(heap, c->k, false, false, e);
}

/* The first i' in [i, n) whose od_sort_key_f32 beats thr (desc: above it,
 * else below), or n. The keys are built in int32 lanes as od_sort_key_f32
 * builds them one at a time. */
__attribute__((target("avx512f"))) static int64_t topk_next_f32_512(const float *x, int64_t i, int64_t n,
                                                                  int32_t thr, bool desc)
{
    const __m512i mag = _mm512_set1_epi32(INT32_MAX), inf = _mm512_set1_epi32(0x7f800000),
                  zero = _mm512_setzero_si512(), t = _mm512_set1_epi32(thr);
    for (; i + 16 <= n; i += 16) {
        __m512i b = _mm512_loadu_si512(x + i), u = _mm512_and_si512(b, mag);
        __m512i k = _mm512_xor_si512(b, _mm512_and_si512(_mm512_srai_epi32(b, 31), mag));
        k = _mm512_mask_mov_epi32(k, _mm512_cmpeq_epi32_mask(u, zero), zero); /* -0.0 ties 0.0 */
        k = _mm512_mask_mov_epi32(k, _mm512_cmpgt_epi32_mask(u, inf), mag);    /* every NaN on top */
        __mmask16 m = desc ? _mm512_cmpgt_epi32_mask(k, t) : _mm512_cmplt_epi32_mask(k, t);
        if (m)
            return i + __builtin_ctz(m);
    }
    for (; i < n; i++) {
        int64_t k = od_sort_key_f32(x[i]);
        if (desc ? k > thr : k < thr)
            break;
    }
    return i;
}

/* topk of one line through a heap of k: the pairs past the first k are
 * offered in order, skipping those that cannot beat the heap's top (the
 * offer would refuse them: the result is the same). topk's keys are always
 * integers (its float lines are keyed). */
static void topk_stream(const sort_ctx *c, int64_t base, od_sort_elem *heap, bool simd)
{
    for (int64_t k = 0; k < c->k; k++)
        heap[k] = pair_at(c, base, k);
    od_sort_topk_begin(heap, c->k, c->desc, false);
    if (simd) {
        const float *x = (const float *)c->keys + base;
        for (int64_t k = c->k; (k = topk_next_f32_512(x, k, c->n, (int32_t)heap[0].k.i, c->desc)) < c->n; k++)
            topk_offer(c, heap, pair_at(c, base, k));
    } else {
        for (int64_t k = c->k; k < c->n; k++)
            topk_offer(c, heap, pair_at(c, base, k));
    }
    od_sort_topk_end(heap, c->k, c->desc, false);
}

/* Lines [begin, end), with scratch of their own: 2n pairs, or k for a topk
 * that streams the line through a heap (od_sort_algo.h's partial-sort case:
 * no line-sized copy to build and fault in). */
static void sort_lines(void *ctx, int64_t begin, int64_t end)
{
    sort_ctx *c = ctx;
    int64_t n = c->n;
    bool stream = c->op == OD_SORT_OP_TOPK && c->k > 0 && c->k * 64 <= n;
    bool simd = stream && c->f32 && c->keyed && c->inner == 1 && __builtin_cpu_supports("avx512f");
    od_sort_elem *buf = malloc((size_t)(stream ? c->k : 2 * n) * sizeof *buf);
    if (!buf) {
        __atomic_store_n(&c->oom, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t l = begin; l < end; l++) {
        int64_t o = l / c->inner, j = l % c->inner, base = o * n * c->inner + j, first = 0;
        if (stream) {
            topk_stream(c, base, buf, simd);
        } else {
            for (int64_t k = 0; k < n; k++)
                buf[k] = pair_at(c, base, k);
            first = order_line(c, buf, buf + n);
        }
        int64_t obase = o * c->on * c->inner + j;
        for (int64_t k = 0; k < c->on; k++) {
            int64_t src = buf[first + k].idx;
            memcpy(c->v + (size_t)(obase + k * c->inner) * c->es, c->x + (size_t)(base + src * c->inner) * c->es,
                   c->es);
            c->ix[obase + k * c->inner] = src;
        }
    }
    free(buf);
}

od_status od_cpu_sort(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec[2];
    int nouts = 0;
    od_scan_info info;
    od_status st;
    if ((st = od_shape_scan(id, s, spec, &nouts, err)) || (st = od_scan_parse(id, s, &info, err)) ||
        (st = od_scan_check_dtype(id, s, &info, err)))
        return st;
    od_tensor *self = s->args[0].u.t, *outs[2] = {NULL, NULL}, *x = NULL, *keys = NULL;
    if ((st = od_alloc_outputs(s, spec, nouts, outs, err)))
        return st;
    int64_t n = info.size;
    int opc = od_sort_op_of(id, &info);
    /* Lines of the outputs: sort n per line, topk k, the selections 1. */
    int64_t on = opc == OD_SORT_OP_TOPK ? info.k : opc >= OD_SORT_OP_KTHVALUE ? 1 : n;
    if (self->ndim == 0)
        on = 1; /* ATen copies a 0-dim self, even for topk with k == 0 */
    if (od_tensor_numel(self) == 0 && nouts == 1) { /* median() of nothing: NaN as the dtype */
        od_value nan = od_double(NAN);
        char b8[8];
        od_cpu_scalar_to_dtype(&nan, self->dtype, b8);
        memcpy(od_tensor_data(outs[0]), b8, od_dtype_size(self->dtype));
        goto done;
    }
    if (od_tensor_numel(self) == 0 || on == 0)
        goto done;
    int64_t one_ix; /* median(), nanmedian(): the index chosen is not returned */
    bool fl = od_dtype_is_floating(self->dtype);
    bool f32 = self->dtype == OD_FLOAT32; /* keys read from x itself: no line-sized double copy */
    if ((st = od_cpu_to_dtype(self, self->dtype, &x, err)) ||
        (!f32 && (st = od_cpu_to_dtype(self, fl ? OD_FLOAT64 : OD_INT64, &keys, err))))
        goto fail;
    sort_ctx c = {.op = opc, .fl = fl, .desc = info.descending, .sorted = info.sorted,
                  .keyed = fl && opc < OD_SORT_OP_MEDIAN, .n = n, .on = on,
                  .inner = info.inner, .k = info.k, .es = od_dtype_size(self->dtype), .x = od_tensor_data(x),
                  .keys = od_tensor_data(f32 ? x : keys), .f32 = f32, .v = od_tensor_data(outs[0]),
                  .ix = nouts == 2 ? (int64_t *)od_tensor_data(outs[1]) : &one_ix};
    if ((st = od_parallel_for(info.outer * info.inner, SORT_GRAIN / n + 1, sort_lines, &c)))
        goto fail;
    if (c.oom) {
        st = od_error_set(err, OD_ENOMEM, "%s: out of memory for the sort's scratch", od_op_name(op));
        goto fail;
    }
done:
    od_tensor_release(x);
    od_tensor_release(keys);
    for (int i = 0; i < nouts; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = nouts;
    return OD_OK;
fail:
    od_tensor_release(x);
    od_tensor_release(keys);
    for (int i = 0; i < nouts; i++)
        od_tensor_release(outs[i]);
    return st;
}
