/* masked.c — CPU masked_fill (Scalar and Tensor value), nonzero and take.
 *
 * Invariants: the shape functions (kernels/shape_index.c) have checked the
 * shapes and dtypes. masked_fill reads its mask as ATen 1.13's CPU kernel
 * does: a bool mask as is (masked_fill_ writes self in place, expanded or
 * not, as ATen does with a deprecation warning), any other dtype by the first byte of each
 * element, which must be 0 or 1 ("Mask tensor can take 0 and 1 values
 * only"). nonzero's result size depends on the data: it counts first and
 * allocates [count, ndim] itself (its shape function only refuses Meta, as
 * torch's Meta does); a contiguous tensor is counted and written per block,
 * in parallel. take checks every index before it reads, or (with a
 * contiguous self and index, in parallel) as it reads, reporting the first
 * bad one in order. masked_fill of dense operands of one shape with a bool
 * mask is a parallel select. The rest is single-threaded, any strides.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "od_parallel.h"
#include "iter.h"
#include "od_shape.h"

/* Row-major walk over sizes[0..nd) for up to two strided operands. */
typedef struct rm_walk {
    int nd;
    int64_t sizes[OD_MAX_DIMS], coord[OD_MAX_DIMS];
} rm_walk;

static void rm_init(rm_walk *w, const int64_t *sizes, int nd)
{
    memset(w, 0, sizeof *w);
    w->nd = nd;
    if (nd > 0)
        memcpy(w->sizes, sizes, sizeof(int64_t) * (size_t)nd);
}

static int64_t rm_offset(const rm_walk *w, const int64_t *strides)
{
    int64_t o = 0;
    for (int k = 0; k < w->nd; k++)
        o += w->coord[k] * strides[k];
    return o;
}

static void rm_next(rm_walk *w)
{
    for (int k = w->nd - 1; k >= 0; k--) {
        if (++w->coord[k] < w->sizes[k])
            return;
        w->coord[k] = 0;
    }
}

/* Element p of dtype dt is not zero (NaN is not; -0.0 is; no nonzero int64
 * converts to 0.0). */
static bool is_nonzero(const char *p, od_dtype dt)
{
    return od_cpu_load_f64(p, dt) != 0.0;
}

/* masked_fill of contiguous operands of one shape with a bool mask:
 * out[i] = mask[i] ? v : src[i] (src is self, or out itself in place), as
 * bit masks (no branch; the compiler vectorises it), in parallel blocks. The walk below
 * branches on every mask byte: 1e6 float32 under a random mask took
 * 6.7 ms, torch 1.8. */
typedef struct mf_job {
    char *o;
    const char *src;
    const uint8_t *m;
    char v[8];
    size_t es;
} mf_job;

OD_CPU_CLONES static void mf_chunk(void *ctx, int64_t b, int64_t e)
{
    const mf_job *j = ctx;
#define MF_SEL_(T)                                              \
    {                                                           \
        T *o = (T *)(void *)j->o, v;                            \
        const T *x = (const T *)(const void *)j->src;           \
        memcpy(&v, j->v, sizeof v);                             \
        for (int64_t i = b; i < e; i++) {                       \
            T k = (T)0 - (T)(j->m[i] != 0); /* a mask of bits */ \
            o[i] = (T)((x[i] & (T)~k) | (v & k));               \
        }                                                       \
    }
    switch (j->es) {
    case 1: MF_SEL_(uint8_t) break;
    case 2: MF_SEL_(uint16_t) break;
    case 4: MF_SEL_(uint32_t) break;
    default: MF_SEL_(uint64_t) break;
    }
#undef MF_SEL_
}

static bool same_dense(const od_tensor *a, const od_tensor *b)
{
    return a->ndim == b->ndim && !memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) &&
           od_tensor_is_contiguous(a) && od_tensor_is_contiguous(b);
}

od_status od_cpu_masked_fill(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_masked_fill(id, s, &spec, &nouts, err);
    if (st)
        return st;
    od_tensor *self = s->args[0].u.t, *mask = s->args[1].u.t, *out = NULL, *mview = NULL;
    bool inplace = spec.alias_of == 0; /* masked_fill_: self is written, whatever its layout */
    /* a 0-dim CPU value tensor as its item() */
    od_value v = s->args[2].tag == OD_T_TENSOR ? od_cpu_load_value(od_tensor_data(s->args[2].u.t), s->args[2].u.t->dtype)
                                               : s->args[2];
    if ((st = od_scalar_check_fits(&v, self->dtype, err)))
        return st;
    char vbuf[8] = {0};
    od_cpu_scalar_to_dtype(&v, self->dtype, vbuf);
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        return st;
    if (mask->dtype == OD_BOOL && same_dense(mask, out) && same_dense(self, out)) {
        mf_job j = {od_tensor_data(out), od_tensor_data(self), od_tensor_data(mask), {0}, od_dtype_size(out->dtype)};
        memcpy(j.v, vbuf, sizeof j.v);
        st = od_parallel_for(od_tensor_numel(out), OD_CPU_GRAIN, mf_chunk, &j);
        return od_cpu_return1(s, out, st);
    }
    if ((!inplace && (st = od_cpu_copy_into(out, self, err))) ||
        (st = od_tensor_expand(mask, out->sizes, out->ndim, &mview, err)))
        goto done;
    size_t es = od_dtype_size(out->dtype);
    bool byte_mask = mask->dtype != OD_BOOL;
    const char *md = od_tensor_data(mview);
    size_t ms = od_dtype_size(mask->dtype);
    char *od = od_tensor_data(out);
    rm_walk w;
    rm_init(&w, out->sizes, out->ndim);
    int64_t n = od_tensor_numel(out);
    for (int64_t i = 0; i < n; i++, rm_next(&w)) {
        /* ATen reads a non-bool mask's first byte (its lowest on x86) */
        uint8_t m = *(const uint8_t *)(md + rm_offset(&w, mview->strides) * (int64_t)ms);
        if (byte_mask && m > 1) {
            st = od_error_set(err, OD_EINVAL, "Mask tensor can take 0 and 1 values only");
            goto done;
        }
        if (m)
            memcpy(od + rm_offset(&w, out->strides) * (int64_t)es, vbuf, es);
    }
done:
    od_tensor_release(mview);
    return od_cpu_return1(s, out, st);
}

/* nonzero of a contiguous tensor of these dtypes: typed tests (a float is
 * nonzero unless +-0.0, a NaN is nonzero, as != 0.0 has it), counted per
 * block in parallel, then each block writes its coordinates from its own
 * offset (the counts' prefix sum), so the rows come in row-major order. */
#define NZ_BLOCK 65536
#define NZ_SWITCH_(dt, M)                                                                        \
    switch (dt) {                                                                                \
    case OD_FLOAT32: M(float, v != 0) break;                                                     \
    case OD_FLOAT64: M(double, v != 0) break;                                                    \
    case OD_FLOAT16:                                                                             \
    case OD_BFLOAT16: M(uint16_t, (v & 0x7fff) != 0) break;                                      \
    case OD_INT16: M(uint16_t, v != 0) break;                                                    \
    case OD_INT32: M(uint32_t, v != 0) break;                                                    \
    case OD_INT64: M(uint64_t, v != 0) break;                                                    \
    default: M(uint8_t, v != 0) break; /* bool, uint8, int8 */                                   \
    }

static bool nz_fast_serves(const od_tensor *t)
{
    switch (t->dtype) {
    case OD_FLOAT32: case OD_FLOAT64: case OD_FLOAT16: case OD_BFLOAT16: case OD_INT16: case OD_INT32:
    case OD_INT64: case OD_BOOL: case OD_UINT8: case OD_INT8:
        return od_tensor_is_contiguous(t);
    default:
        return false;
    }
}

typedef struct nz_job {
    const od_tensor *t;
    int64_t n, nblk, count;
    int64_t *counts; /* per block; then each block's first output row */
    int64_t *out;
} nz_job;

static void nz_count(void *ctx, int64_t b, int64_t e)
{
    nz_job *j = ctx;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t lo = blk * NZ_BLOCK, hi = lo + NZ_BLOCK < j->n ? lo + NZ_BLOCK : j->n, c = 0;
#define NZ_COUNT_(T, TEST)                                                                       \
    for (int64_t i = lo; i < hi; i++) {                                                          \
        T v = ((const T *)od_tensor_data(j->t))[i];                                              \
        c += TEST;                                                                               \
    }
        NZ_SWITCH_(j->t->dtype, NZ_COUNT_)
#undef NZ_COUNT_
        j->counts[blk] = c;
    }
}

static void nz_write(void *ctx, int64_t b, int64_t e)
{
    nz_job *j = ctx;
    const od_tensor *t = j->t;
    const int nd = t->ndim;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t lo = blk * NZ_BLOCK, hi = lo + NZ_BLOCK < j->n ? lo + NZ_BLOCK : j->n;
        int64_t *o = j->out + j->counts[blk] * nd, coord[OD_MAX_DIMS];
        for (int64_t k = nd - 1, q = lo; k >= 0; k--) { /* lo's coordinates */
            coord[k] = q % t->sizes[k];
            q /= t->sizes[k];
        }
        /* 1-d: each index is stored whether or not it counts, and the row
         * advances by the test (no branch to mispredict); the store stays
         * inside the block's own rows, which the next block's thread may be
         * writing already */
#define NZ_WRITE1_(T, TEST)                                                                      \
    for (int64_t i = lo; i < hi; i++) {                                                          \
        T v = ((const T *)od_tensor_data(t))[i];                                                 \
        if (o < end)                                                                             \
            *o = i;                                                                              \
        o += (TEST);                                                                             \
    }
        if (nd == 1) {
            int64_t *end = j->out + (blk + 1 < j->nblk ? j->counts[blk + 1] : j->count);
            NZ_SWITCH_(t->dtype, NZ_WRITE1_)
            continue;
        }
#undef NZ_WRITE1_
#define NZ_WRITE_(T, TEST)                                                                       \
    for (int64_t i = lo; i < hi; i++) {                                                          \
        T v = ((const T *)od_tensor_data(t))[i];                                                 \
        if (TEST) {                                                                              \
            memcpy(o, coord, sizeof(int64_t) * (size_t)nd);                                      \
            o += nd;                                                                             \
        }                                                                                        \
        for (int k = nd - 1; k >= 0 && ++coord[k] == t->sizes[k]; k--)                           \
            coord[k] = 0;                                                                        \
    }
        NZ_SWITCH_(t->dtype, NZ_WRITE_)
#undef NZ_WRITE_
    }
}

static od_status nonzero_fast(od_tensor *self, od_stack *s, od_error *err)
{
    int64_t n = od_tensor_numel(self), nblk = (n + NZ_BLOCK - 1) / NZ_BLOCK, count = 0;
    int64_t *counts = malloc((size_t)(nblk ? nblk : 1) * sizeof *counts);
    if (!counts)
        return od_error_set(err, OD_ENOMEM, "nonzero: out of memory");
    nz_job j = {self, n, nblk, 0, counts, NULL};
    od_status st = od_parallel_for(nblk, 1, nz_count, &j);
    for (int64_t b = 0; b < nblk && !st; b++) {
        int64_t c = counts[b];
        counts[b] = count;
        count += c;
    }
    od_out_spec spec;
    int64_t sizes[2] = {count, self->ndim};
    od_out_spec_init(&spec, OD_INT64, self->device, sizes, 2);
    od_tensor *out = NULL;
    if (!st && !(st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)) && self->ndim > 0 && count > 0) {
        j.out = od_tensor_data(out);
        j.count = count;
        st = od_parallel_for(nblk, 1, nz_write, &j);
    }
    free(counts);
    return od_cpu_return1(s, out, st);
}
#undef NZ_SWITCH_

od_status od_cpu_nonzero(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)op;
    (void)ks;
    if (s->nargs < 1 || s->args[0].tag != OD_T_TENSOR || !s->args[0].u.t)
        return od_error_set(err, OD_EINVAL, "nonzero(): argument 'self' must be a Tensor");
    od_tensor *self = s->args[0].u.t;
    if (nz_fast_serves(self))
        return nonzero_fast(self, s, err);
    const char *d = od_tensor_data(self);
    size_t es = od_dtype_size(self->dtype);
    int64_t n = od_tensor_numel(self), count = 0;
    rm_walk w;
    rm_init(&w, self->sizes, self->ndim);
    for (int64_t i = 0; i < n; i++, rm_next(&w))
        count += is_nonzero(d + rm_offset(&w, self->strides) * (int64_t)es, self->dtype);
    od_out_spec spec;
    int64_t sizes[2] = {count, self->ndim};
    od_out_spec_init(&spec, OD_INT64, self->device, sizes, 2);
    od_tensor *out = NULL;
    od_status st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err);
    if (st)
        return st;
    int64_t *o = od_tensor_data(out);
    rm_init(&w, self->sizes, self->ndim);
    for (int64_t i = 0, r = 0; i < n && r < count; i++, rm_next(&w))
        if (is_nonzero(d + rm_offset(&w, self->strides) * (int64_t)es, self->dtype)) {
            if (self->ndim > 0) /* a 0-dim result row is empty (and o may be NULL) */
                memcpy(o + r * self->ndim, w.coord, sizeof(int64_t) * (size_t)self->ndim);
            r++;
        }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}

/* take with a contiguous self and index: out[i] = self[index[i]] in
 * parallel chunks, each index checked as it is read; a bad one is skipped
 * and the lowest bad position kept, so the error names the index a serial
 * pass meets first (the fresh result is released on it). */
typedef struct take_job {
    const int64_t *iv;
    const char *sd;
    char *od;
    int64_t numel;
    size_t es;
    _Atomic int64_t first_bad; /* INT64_MAX: none */
} take_job;

static void take_chunk(void *ctx, int64_t b, int64_t e)
{
    take_job *j = ctx;
#define TAKE_LOOP_(T)                                                                \
    for (int64_t i = b; i < e; i++) {                                                \
        int64_t v = j->iv[i];                                                        \
        if (v < -j->numel || v >= j->numel) {                                        \
            od_atomic_min_i64(&j->first_bad, i);                                     \
            continue;                                                                \
        }                                                                            \
        ((T *)(void *)j->od)[i] = ((const T *)(const void *)j->sd)[v < 0 ? v + j->numel : v]; \
    }
    switch (j->es) {
    case 1: TAKE_LOOP_(uint8_t) break;
    case 2: TAKE_LOOP_(uint16_t) break;
    case 4: TAKE_LOOP_(uint32_t) break;
    case 8: TAKE_LOOP_(uint64_t) break;
    default:
        for (int64_t i = b; i < e; i++) {
            int64_t v = j->iv[i];
            if (v < -j->numel || v >= j->numel) {
                od_atomic_min_i64(&j->first_bad, i);
                continue;
            }
            memcpy(j->od + (size_t)i * j->es, j->sd + (size_t)(v < 0 ? v + j->numel : v) * j->es, j->es);
        }
    }
#undef TAKE_LOOP_
}

#define TAKE_GRAIN 16384 /* indices per parallel task, at least */

od_status od_cpu_take(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)op;
    (void)ks;
    od_out_spec spec;
    int nouts = 0;
    od_status st = od_shape_take(OD_OPID_OF_CTX(ctx), s, &spec, &nouts, err);
    if (st)
        return st;
    od_tensor *self = s->args[0].u.t, *index = s->args[1].u.t, *out = NULL;
    int64_t numel = od_tensor_numel(self), n = od_tensor_numel(index);
    const int64_t *iv = od_tensor_data(index);
    size_t es = od_dtype_size(self->dtype);
    const char *sd = od_tensor_data(self);
    if (od_tensor_is_contiguous(self) && od_tensor_is_contiguous(index)) {
        if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
            return st;
        take_job j = {.iv = iv, .sd = sd, .od = od_tensor_data(out), .numel = numel, .es = es,
                      .first_bad = INT64_MAX};
        if ((st = od_parallel_for(n, TAKE_GRAIN, take_chunk, &j)) == OD_OK && j.first_bad != INT64_MAX) {
            int64_t wr;
            st = od_take_check_index(iv[j.first_bad], numel, &wr, err);
        }
        return od_cpu_return1(s, out, st);
    }
    rm_walk w;
    rm_init(&w, index->sizes, index->ndim);
    for (int64_t i = 0, wr; i < n; i++, rm_next(&w))
        if ((st = od_take_check_index(iv[rm_offset(&w, index->strides)], numel, &wr, err)))
            return st;
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        return st;
    char *od = od_tensor_data(out);
    rm_init(&w, index->sizes, index->ndim);
    for (int64_t i = 0; i < n; i++, rm_next(&w)) {
        int64_t lin = 0;
        (void)od_take_check_index(iv[rm_offset(&w, index->strides)], numel, &lin, err);
        memcpy(od + i * (int64_t)es, sd + od_cpu_offset_of(self, lin) * (int64_t)es, es);
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}
