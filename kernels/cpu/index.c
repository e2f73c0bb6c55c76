/* index.c — CPU index_select and flip.
 *
 * Invariants: od_shape_index_select (kernels/shape_reduce.c) has checked the
 * dim, the index's rank and dtype (int32/int64). Every index is checked
 * against the dim's size as its slab is copied into the fresh result, which
 * is released on a bad one: no half-filled result escapes; negative indices
 * are out of range, as in torch, and the message is ATen's (bad_index). The source is viewed as [outer, size(dim),
 * inner] over a contiguous copy (none when self already is contiguous); a
 * selected slab is one typed copy (1-8 bytes) or one memcpy.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "od_shape.h"

typedef struct isel_ctx {
    const char *src;
    char *dst;
    const int64_t *idx;
    int64_t n, dsize;
    size_t slab;     /* bytes per selected slab (inner elements) */
    atomic_bool bad; /* an index out of range was met (its slab was not copied) */
} isel_ctx;

/* Output slabs [begin, end): slab r is self's slab idx[r % n] of outer
 * block r / n, (outer, i) stepped along instead of divided out; slabs of
 * 1, 2, 4 or 8 bytes (a single element: index_select along the last dim)
 * are typed loads and stores, not memcpy calls. */
static void isel_rows(void *ctx, int64_t begin, int64_t end)
{
    isel_ctx *c = ctx;
    int64_t o = begin / c->n, i = begin % c->n;
#define ISEL_LOOP_(COPY)                                                                         \
    for (int64_t r = begin; r < end; r++) {                                                      \
        int64_t x = c->idx[i];                                                                   \
        if ((uint64_t)x >= (uint64_t)c->dsize)                                                   \
            atomic_store_explicit(&c->bad, true, memory_order_relaxed);                          \
        else                                                                                     \
            COPY;                                                                                \
        if (++i == c->n) {                                                                       \
            i = 0;                                                                               \
            o++;                                                                                 \
        }                                                                                        \
    }
#define ISEL_T_(T) ISEL_LOOP_(((T *)(void *)c->dst)[r] = ((const T *)(const void *)c->src)[o * c->dsize + x])
    switch (c->slab) {
    case 1: ISEL_T_(uint8_t) break;
    case 2: ISEL_T_(uint16_t) break;
    case 4: ISEL_T_(uint32_t) break;
    case 8: ISEL_T_(uint64_t) break;
    default:
        ISEL_LOOP_(memcpy(c->dst + (size_t)r * c->slab, c->src + (size_t)(o * c->dsize + x) * c->slab, c->slab))
    }
#undef ISEL_T_
#undef ISEL_LOOP_
}

/* The error for a bad index among iv[0..n): ATen 1.13 takes its dim-1 fast
 * path (index_select_out_cpu_dim1_) along dim 1 of a tensor of two or more
 * dims, which names the first bad index in order; elsewhere its message
 * names none. */
static od_status bad_index(const od_tensor *self, int d, const int64_t *iv, int64_t n, int64_t dsize, od_error *err)
{
    if (self->ndim > 1 && d == 1)
        for (int64_t i = 0; i < n; i++)
            if (iv[i] < 0 || iv[i] >= dsize)
                return od_error_set(err, OD_EINVAL, "INDICES element is out of DATA bounds, id=%" PRId64
                                                    " axis_dim=%" PRId64, iv[i], dsize);
    return od_error_set(err, OD_EINVAL, "index out of range in self");
}

od_status od_cpu_index_select(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_index_select(OD_OPID_OF_CTX(ctx), s, &spec, &nouts, err);
    if (st)
        return st;
    od_tensor *self = s->args[0].u.t, *index = s->args[2].u.t;
    int d = 0;
    if ((st = od_wrap_dim(s->args[1].u.i, self->ndim, &d, err)))
        return st;
    int64_t dsize = self->ndim > 0 ? self->sizes[d] : 1;
    /* Indices as a contiguous int64 array, each checked. */
    od_tensor *idx = NULL, *src = NULL, *out = NULL;
    if ((st = od_cpu_to_dtype(index, OD_INT64, &idx, err)))
        return st;
    const int64_t *iv = od_tensor_data(idx);
    int64_t n = od_tensor_numel(idx);
    /* every output row is copied from self below (or the result, fresh, is
     * released on a bad index, which the copy checks as it goes) */
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err))) {
        od_tensor_release(idx);
        return st;
    }
    if (od_tensor_numel(out) == 0) { /* nothing to copy: the indices are still checked */
        for (int64_t i = 0; i < n && !st; i++)
            if (iv[i] < 0 || iv[i] >= dsize)
                st = od_error_set(err, OD_EINVAL, "index out of range in self");
    } else {
        if ((st = od_cpu_to_dtype(self, self->dtype, &src, err)))
            goto done;
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < self->ndim; k++) {
            if (k < d)
                outer *= self->sizes[k];
            else if (k > d)
                inner *= self->sizes[k];
        }
        isel_ctx c = {od_tensor_data(src), od_tensor_data(out), iv, n, dsize,
                      (size_t)inner * od_dtype_size(self->dtype), false};
        st = od_parallel_for(outer * n, (int64_t)(65536 / (c.slab + 1)) + 1, isel_rows, &c);
        if (!st && atomic_load(&c.bad))
            st = bad_index(self, d, iv, n, dsize, err);
    }
done:
    od_tensor_release(src);
    od_tensor_release(idx);
    return od_cpu_return1(s, out, st);
}

/* flip: the marked dims reversed, over a contiguous copy of self (none when
 * it already is one) seen as rows of its last dim. Each output row comes
 * from the source row at the mirrored coordinates, copied as is (memcpy) or
 * reversed (typed, for 1-8 byte elements) when the last dim is flipped; a
 * row longer than FLIP_SEG is cut into segments, so a 1-d flip spreads over
 * the pool too. (The composite, od_cea_flip, serves the other devices: an
 * index_select per dim, with an arange of indices each.) */
#define FLIP_SEG 16384

typedef struct flip_job {
    const char *src;
    char *dst;
    const od_tensor *t;
    bool mark[OD_MAX_DIMS];
    int64_t rowlen, segs;
    size_t es;
} flip_job;

static void flip_tasks(void *ctx, int64_t begin, int64_t end)
{
    const flip_job *j = ctx;
    const int nd = j->t->ndim;
    const bool last = nd > 0 && j->mark[nd - 1];
    const int64_t len = j->rowlen;
    for (int64_t u = begin; u < end; u++) {
        int64_t row = u / j->segs, lo = u % j->segs * FLIP_SEG, hi = lo + FLIP_SEG < len ? lo + FLIP_SEG : len;
        int64_t srow = 0, rem = row, mul = 1;
        for (int k = nd - 2; k >= 0; k--) {
            int64_t sz = j->t->sizes[k], c = rem % sz;
            rem /= sz;
            srow += (j->mark[k] ? sz - 1 - c : c) * mul;
            mul *= sz;
        }
        const char *sp = j->src + (size_t)(srow * len) * j->es;
        char *dp = j->dst + (size_t)(row * len) * j->es;
        if (!last) {
            memcpy(dp + (size_t)lo * j->es, sp + (size_t)lo * j->es, (size_t)(hi - lo) * j->es);
            continue;
        }
#define FLIP_REV_(T)                                                                             \
    for (int64_t i = lo; i < hi; i++)                                                            \
        ((T *)(void *)dp)[i] = ((const T *)(const void *)sp)[len - 1 - i];
        switch (j->es) {
        case 1: FLIP_REV_(uint8_t) break;
        case 2: FLIP_REV_(uint16_t) break;
        case 4: FLIP_REV_(uint32_t) break;
        case 8: FLIP_REV_(uint64_t) break;
        default:
            for (int64_t i = lo; i < hi; i++)
                memcpy(dp + (size_t)i * j->es, sp + (size_t)(len - 1 - i) * j->es, j->es);
        }
#undef FLIP_REV_
    }
}

od_status od_cpu_flip(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_flip(OD_OPID_OF_CTX(ctx), s, &spec, &nouts, err);
    if (st)
        return st;
    od_tensor *self = s->args[0].u.t, *src = NULL, *out = NULL;
    flip_job j = {.t = self, .es = od_dtype_size(self->dtype)};
    const int64_t *dims;
    int64_t one, nd = od_shape_int_list(&s->args[1], &dims, &one);
    if ((st = od_mark_unique_dims(self, dims, nd, j.mark, err)) ||
        (st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        return st;
    int64_t numel = od_tensor_numel(self);
    if (numel > 0) {
        if ((st = od_cpu_to_dtype(self, self->dtype, &src, err)))
            goto done;
        j.src = od_tensor_data(src);
        j.dst = od_tensor_data(out);
        j.rowlen = self->ndim ? self->sizes[self->ndim - 1] : 1;
        j.segs = (j.rowlen + FLIP_SEG - 1) / FLIP_SEG;
        int64_t units = numel / j.rowlen * j.segs;
        st = od_parallel_for(units, j.rowlen >= FLIP_SEG ? 1 : FLIP_SEG / j.rowlen + 1, flip_tasks, &j);
    }
done:
    od_tensor_release(src);
    return od_cpu_return1(s, out, st);
}
