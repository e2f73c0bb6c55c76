/* unique.c — repeat_interleave.Tensor and unique_consecutive on the CPU:
 * operators whose result size depends on the data.
 *
 * Invariants: the od_*_check functions (shape_unique.c) validate first; the
 * kernels then count and size their results themselves (od_alloc_outputs
 * with their own od_out_spec). Values compare as torch's != does: floating
 * ones as doubles (NaN unequal to itself, -0.0 equal to 0.0), the others as
 * int64; inputs are read through their strides.
 */
/* as elementwise.c: gcc's default -O2 cost model leaves a loop that needs a peel scalar */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
#include "od_parallel.h"
#include "od_shape.h"

/* Elements at storage offsets oa and ob of t compare equal (as torch's ==). */
static bool same(const od_tensor *t, int64_t oa, int64_t ob)
{
    const char *d = od_tensor_data(t);
    int64_t es = (int64_t)od_dtype_size(t->dtype);
    if (od_dtype_is_floating(t->dtype))
        return od_cpu_load_f64(d + oa * es, t->dtype) == od_cpu_load_f64(d + ob * es, t->dtype);
    return od_cpu_load_i64(d + oa * es, t->dtype) == od_cpu_load_i64(d + ob * es, t->dtype);
}

static od_status spec1(od_out_spec *o, od_dtype dt, od_device dev, const int64_t *sizes, int ndim)
{
    memset(o, 0, sizeof *o);
    o->dtype = dt;
    o->device = dev;
    o->ndim = ndim;
    if (ndim)
        memcpy(o->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
    o->alias_of = -1;
    return OD_OK;
}

/* repeat_interleave's writes: output [at[i], at[i + 1]) holds i, for
 * repeats [b, e), split across the pool (one thread wrote 950k elements
 * through per-element loads in 1.8 ms, torch 0.5). */
typedef struct ri_job {
    const int64_t *at; /* n + 1 exclusive prefix sums of the repeats */
    char *o;
    bool i64;
} ri_job;

/* A short run is written as a whole block of W copies (constant length:
 * vector stores, no loop exit to mispredict on random counts); the copies
 * past its end are overwritten by the runs after it, so only where those
 * runs, in this task, reach that far. */
#define RI_WRITE_(T, W)                                                          \
    {                                                                            \
        T *o = (T *)(void *)j->o;                                                \
        const int64_t *at = j->at, last = at[e];                                 \
        for (int64_t i = b; i < e; i++) {                                        \
            int64_t k0 = at[i], k1 = at[i + 1];                                  \
            if (k1 - k0 <= (W) && k0 + (W) <= last) {                            \
                for (int q = 0; q < (W); q++)                                    \
                    o[k0 + q] = (T)i;                                            \
            } else {                                                             \
                for (int64_t k = k0; k < k1; k++)                                \
                    o[k] = (T)i;                                                 \
            }                                                                    \
        }                                                                        \
    }

static void ri_write(void *ctx, int64_t b, int64_t e)
{
    const ri_job *j = ctx;
    if (j->i64)
        RI_WRITE_(int64_t, 16)
    else
        RI_WRITE_(int32_t, 32)
}
#undef RI_WRITE_

od_status od_cpu_repeat_interleave(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)op;
    (void)ks;
    const od_tensor *r;
    bool has_size;
    int64_t want;
    od_status st = od_repeat_interleave_check(s, &r, &has_size, &want, err);
    if (st)
        return st;
    int64_t n = r->sizes[0], total = 0;
    const char *d = od_tensor_data(r);
    size_t es = od_dtype_size(r->dtype);
    int64_t *at = malloc((size_t)(n + 1) * sizeof *at);
    if (!at)
        return od_error_set(err, OD_ENOMEM, "repeat_interleave: out of memory");
    if (r->dtype == OD_INT64 && od_tensor_is_contiguous(r)) {
        if (n > 0) /* an empty tensor may have no storage: memcpy from NULL is undefined even for 0 bytes */
            memcpy(at, d, (size_t)n * sizeof *at);
    } else {
        for (int64_t i = 0; i < n; i++)
            at[i] = od_cpu_load_i64(d + od_cpu_offset_of(r, i) * (int64_t)es, r->dtype);
    }
    /* ATen checks every count's sign before it sums them */
    for (int64_t i = 0; i < n; i++)
        if (at[i] < 0) {
            free(at);
            return od_error_set(err, OD_EINVAL, "repeats can not be negative");
        }
    for (int64_t i = 0; i < n; i++) {
        int64_t v = at[i];
        at[i] = total;
        if (__builtin_add_overflow(total, v, &total)) {
            free(at);
            return od_error_set(err, OD_EINVAL,
                                "repeat_interleave: the repeats sum to more than %" PRId64 " elements", INT64_MAX);
        }
    }
    at[n] = total;
    if (n > 0 && has_size && want != total) {
        free(at);
        return od_error_set(err, OD_EINVAL, "allocated size does not match required size");
    }
    od_out_spec spec;
    spec1(&spec, r->dtype, r->device, &total, 1);
    od_tensor *out = NULL;
    if (!(st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err))) {
        ri_job j = {at, od_tensor_data(out), r->dtype == OD_INT64};
        /* about 32768 elements written per task */
        st = od_parallel_for(n, total > 0 ? 32768 * n / total + 1 : n + 1, ri_write, &j);
    }
    free(at);
    return od_cpu_return1(s, out, st);
}

/* Slices k and k-1 of x along dim (every other index equal) compare equal. */
static bool same_slice(const od_tensor *x, int dim, int64_t a, int64_t b)
{
    int64_t inner = od_tensor_numel(x) / (x->sizes[dim] ? x->sizes[dim] : 1);
    for (int64_t q = 0; q < inner; q++) {
        /* q enumerates the other dims row-major */
        int64_t rem = q, oa = 0, ob = 0;
        for (int k = x->ndim - 1; k >= 0; k--) {
            if (k == dim) {
                oa += a * x->strides[k];
                ob += b * x->strides[k];
                continue;
            }
            int64_t c = rem % x->sizes[k];
            rem /= x->sizes[k];
            oa += c * x->strides[k];
            ob += c * x->strides[k];
        }
        if (!same(x, oa, ob))
            return false;
    }
    return true;
}

/* unique_consecutive without dim on a contiguous tensor of these dtypes:
 * typed compares of neighbours (floats as floats: NaN unequal to itself,
 * -0.0 equal to 0.0, as the doubles compare), in two parallel passes (count
 * the runs, then write them) instead of per-element offsets, dtype switches
 * and two scratch arrays of n. */
typedef enum { RUNS_NONE, RUNS_F32, RUNS_F64, RUNS_B1, RUNS_B2, RUNS_B4, RUNS_B8 } runs_kind;

static runs_kind runs_kind_of(const od_tensor *x, int dim)
{
    if (dim >= 0 || !od_tensor_is_contiguous(x))
        return RUNS_NONE;
    switch (x->dtype) {
    case OD_FLOAT32: return RUNS_F32;
    case OD_FLOAT64: return RUNS_F64;
    case OD_BOOL:
    case OD_UINT8:
    case OD_INT8: return RUNS_B1;
    case OD_INT16: return RUNS_B2;
    case OD_INT32: return RUNS_B4;
    case OD_INT64: return RUNS_B8;
    default: return RUNS_NONE;
    }
}

#define RUNS_SWITCH_(k, M)                                                                       \
    switch (k) {                                                                                 \
    case RUNS_F32: M(float) break;                                                               \
    case RUNS_F64: M(double) break;                                                              \
    case RUNS_B1: M(uint8_t) break;                                                              \
    case RUNS_B2: M(uint16_t) break;                                                             \
    case RUNS_B4: M(uint32_t) break;                                                             \
    default: M(uint64_t) break;                                                                  \
    }

/* Both passes run per block of RUNS_BLOCK elements over the worker pool:
 * a block counts the runs that start in it (element i starts one when i is
 * 0 or differs from i - 1, which may sit in the block before), the counts'
 * prefix gives each block its first run, and each block then writes its
 * runs' values, its elements' runs and its runs' starts (turned into
 * lengths after). */
#define RUNS_BLOCK 65536

typedef struct runs_job {
    runs_kind k;
    const void *x;
    int64_t n;
    int64_t *first; /* per block: runs starting in it, then the index of its first run */
    void *vals;
    int64_t *inv, *cnt; /* may be NULL */
} runs_job;

/* in vector clones: scalar, the neighbour compares were 28 % of the kernel's time (perf) */
OD_CPU_CLONES static void runs_count_blocks(void *ctx, int64_t b, int64_t e)
{
    runs_job *j = ctx;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t lo = blk * RUNS_BLOCK, hi = lo + RUNS_BLOCK < j->n ? lo + RUNS_BLOCK : j->n, g = lo == 0;
#define RUNS_COUNT_(T)                                                                           \
    {                                                                                            \
        const T *restrict v = j->x;                                                              \
        for (int64_t i = lo > 0 ? lo : 1; i < hi; i++)                                           \
            g += v[i] != v[i - 1];                                                               \
    }
        RUNS_SWITCH_(j->k, RUNS_COUNT_)
#undef RUNS_COUNT_
        j->first[blk] = g;
    }
}

static void runs_fill_blocks(void *ctx, int64_t b, int64_t e)
{
    runs_job *j = ctx;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t lo = blk * RUNS_BLOCK, hi = lo + RUNS_BLOCK < j->n ? lo + RUNS_BLOCK : j->n;
        int64_t g = j->first[blk] - 1, *inv = j->inv, *cnt = j->cnt;
/* the values alone (torch's default) in a loop of their own: no per-element tests of inv and
 * cnt, and no reload of the job's pointers after every store */
#define RUNS_FILL_(T)                                                                            \
    {                                                                                            \
        const T *restrict v = j->x;                                                              \
        T *restrict vals = j->vals;                                                              \
        if (!inv && !cnt) {                                                                      \
            for (int64_t i = lo; i < hi; i++)                                                    \
                if (i == 0 || v[i] != v[i - 1])                                                  \
                    vals[++g] = v[i];                                                            \
        } else                                                                                   \
            for (int64_t i = lo; i < hi; i++) {                                                  \
                if (i == 0 || v[i] != v[i - 1]) {                                                \
                    vals[++g] = v[i];                                                            \
                    if (cnt)                                                                     \
                        cnt[g] = i;                                                              \
                }                                                                                \
                if (inv)                                                                         \
                    inv[i] = g;                                                                  \
            }                                                                                    \
    }
        RUNS_SWITCH_(j->k, RUNS_FILL_)
#undef RUNS_FILL_
    }
}

#undef RUNS_SWITCH_

od_status od_cpu_unique_consecutive(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)op;
    (void)ks;
    const od_tensor *x;
    bool want_inv, want_cnt;
    int dim;
    od_status st = od_unique_consecutive_check(s, &x, &want_inv, &want_cnt, &dim, err);
    if (st)
        return st;
    /* without dim: the flattened elements; with: the slices along dim */
    int64_t n = dim < 0 ? od_tensor_numel(x) : x->sizes[dim], groups = 0;
    runs_kind kind = runs_kind_of(x, dim);
    int64_t *group = NULL, *first = NULL; /* the general path's: group of item i, first item of group g */
    int64_t nblk = (n + RUNS_BLOCK - 1) / RUNS_BLOCK, *blocks = NULL;
    runs_job rj = {.k = kind, .x = od_tensor_data(x), .n = n};
    if (kind != RUNS_NONE) {
        if (!(blocks = malloc((size_t)(nblk ? nblk : 1) * sizeof *blocks)))
            return od_error_set(err, OD_ENOMEM, "unique_consecutive: no memory for %lld blocks", (long long)nblk);
        rj.first = blocks;
        if ((st = od_parallel_for(nblk, 1, runs_count_blocks, &rj))) {
            free(blocks);
            return st;
        }
        for (int64_t b = 0; b < nblk; b++) {
            int64_t c = blocks[b];
            blocks[b] = groups;
            groups += c;
        }
    } else {
        group = malloc((size_t)(n > 0 ? n : 1) * sizeof *group);
        first = malloc((size_t)(n > 0 ? n : 1) * sizeof *first);
        if (!group || !first) {
            free(group);
            free(first);
            return od_error_set(err, OD_ENOMEM, "unique_consecutive: no memory for %lld items", (long long)n);
        }
        for (int64_t i = 0; i < n; i++) {
            bool eq = i > 0 && (dim < 0 ? same(x, od_cpu_offset_of(x, i), od_cpu_offset_of(x, i - 1))
                                        : same_slice(x, dim, i, i - 1));
            if (!eq)
                first[groups++] = i;
            group[i] = groups - 1;
        }
    }
    od_out_spec specs[3];
    int64_t sz[OD_MAX_DIMS], zero = 0;
    if (dim < 0) {
        spec1(&specs[0], x->dtype, x->device, &groups, 1);
        if (want_inv)
            spec1(&specs[1], OD_INT64, x->device, x->sizes, x->ndim);
        else
            spec1(&specs[1], OD_INT64, x->device, &zero, 1);
        spec1(&specs[2], OD_INT64, x->device, want_cnt ? &groups : &zero, 1);
    } else {
        memcpy(sz, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
        sz[dim] = groups;
        spec1(&specs[0], x->dtype, x->device, sz, x->ndim);
        spec1(&specs[1], OD_INT64, x->device, &n, 1); /* unique_dim_consecutive always counts both */
        spec1(&specs[2], OD_INT64, x->device, &groups, 1);
    }
    od_tensor *outs[3] = {0};
    if ((st = od_alloc_outputs_overwrite(s, specs, 3, outs, err))) {
        free(group);
        free(first);
        free(blocks);
        return st;
    }
    size_t es = od_dtype_size(x->dtype);
    const char *src = od_tensor_data(x);
    char *dst = od_tensor_data(outs[0]);
    int64_t *inv = od_tensor_data(outs[1]), *cnt = od_tensor_data(outs[2]);
    if (kind != RUNS_NONE) {
        rj.vals = dst;
        rj.inv = od_tensor_numel(outs[1]) == n ? inv : NULL;
        rj.cnt = od_tensor_numel(outs[2]) == groups ? cnt : NULL;
        st = od_parallel_for(nblk, 1, runs_fill_blocks, &rj);
        for (int64_t g = 0; rj.cnt && g < groups; g++) /* starts -> lengths */
            cnt[g] = (g + 1 < groups ? cnt[g + 1] : n) - cnt[g];
    } else if (dim < 0) {
        for (int64_t g = 0; g < groups; g++)
            memcpy(dst + (size_t)g * es, src + od_cpu_offset_of(x, first[g]) * (int64_t)es, es);
    } else {
        /* output element (row-major over sz) takes x's at slice first[c_dim] */
        int64_t m = od_tensor_numel(outs[0]);
        for (int64_t i = 0; i < m; i++) {
            int64_t rem = i, off = 0;
            for (int k = x->ndim - 1; k >= 0; k--) {
                int64_t c = rem % sz[k];
                rem /= sz[k];
                off += (k == dim ? first[c] : c) * x->strides[k];
            }
            memcpy(dst + (size_t)i * es, src + off * (int64_t)es, es);
        }
    }
    if (kind == RUNS_NONE && od_tensor_numel(outs[1]) == n)
        for (int64_t i = 0; i < n; i++)
            inv[i] = group[i];
    if (kind == RUNS_NONE && od_tensor_numel(outs[2]) == groups)
        for (int64_t g = 0; g < groups; g++)
            cnt[g] = (g + 1 < groups ? first[g + 1] : n) - first[g];
    free(group);
    free(first);
    free(blocks);
    if (st) {
        for (int i = 0; i < 3; i++)
            od_tensor_release(outs[i]);
        return st;
    }
    for (int i = 0; i < 3; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = 3;
    return OD_OK;
}
