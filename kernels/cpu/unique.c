/* unique.c — repeat_interleave.Tensor and unique_consecutive on the CPU:
 * operators whose result size depends on the data.
 *
 * Invariants: the od_*_check functions (shape_unique.c) validate first; the
 * kernels then count and size their results themselves (od_alloc_outputs
 * with their own od_out_spec). Values compare as torch's != does: floating
 * ones as doubles (NaN unequal to itself, -0.0 equal to 0.0), the others as
 * int64; inputs are read through their strides.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "iter.h"
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
    /* ATen checks every count's sign before it sums them */
    for (int64_t i = 0; i < n; i++)
        if (od_cpu_load_i64(d + od_cpu_offset_of(r, i) * (int64_t)es, r->dtype) < 0)
            return od_error_set(err, OD_EINVAL, "repeats can not be negative");
    for (int64_t i = 0; i < n; i++) {
        int64_t v = od_cpu_load_i64(d + od_cpu_offset_of(r, i) * (int64_t)es, r->dtype);
        if (__builtin_add_overflow(total, v, &total))
            return od_error_set(err, OD_EINVAL,
                                "repeat_interleave: the repeats sum to more than %" PRId64 " elements", INT64_MAX);
    }
    if (n > 0 && has_size && want != total)
        return od_error_set(err, OD_EINVAL, "allocated size does not match required size");
    od_out_spec spec;
    spec1(&spec, r->dtype, r->device, &total, 1);
    od_tensor *out = NULL;
    if ((st = od_alloc_outputs_overwrite(s, &spec, 1, &out, err)))
        return st;
    char *o = od_tensor_data(out);
    for (int64_t i = 0, at = 0; i < n; i++) {
        int64_t v = od_cpu_load_i64(d + od_cpu_offset_of(r, i) * (int64_t)es, r->dtype);
        for (int64_t j = 0; j < v; j++, at++) {
            if (r->dtype == OD_INT64)
                ((int64_t *)o)[at] = i;
            else
                ((int32_t *)o)[at] = (int32_t)i;
        }
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
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
    int64_t n = dim < 0 ? od_tensor_numel(x) : x->sizes[dim];
    int64_t *group = malloc((size_t)(n > 0 ? n : 1) * sizeof *group); /* group of item i */
    int64_t *first = malloc((size_t)(n > 0 ? n : 1) * sizeof *first); /* first item of group g */
    if (!group || !first) {
        free(group);
        free(first);
        return od_error_set(err, OD_ENOMEM, "unique_consecutive: no memory for %lld items", (long long)n);
    }
    int64_t groups = 0;
    for (int64_t i = 0; i < n; i++) {
        bool eq = i > 0 && (dim < 0 ? same(x, od_cpu_offset_of(x, i), od_cpu_offset_of(x, i - 1)) : same_slice(x, dim, i, i - 1));
        if (!eq)
            first[groups++] = i;
        group[i] = groups - 1;
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
        return st;
    }
    size_t es = od_dtype_size(x->dtype);
    const char *src = od_tensor_data(x);
    char *dst = od_tensor_data(outs[0]);
    if (dim < 0) {
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
    int64_t *inv = od_tensor_data(outs[1]), *cnt = od_tensor_data(outs[2]);
    if (od_tensor_numel(outs[1]) == n)
        for (int64_t i = 0; i < n; i++)
            inv[i] = group[i];
    if (od_tensor_numel(outs[2]) == groups)
        for (int64_t g = 0; g < groups; g++)
            cnt[g] = (g + 1 < groups ? first[g + 1] : n) - first[g];
    free(group);
    free(first);
    for (int i = 0; i < 3; i++)
        s->rets[i] = od_tensor_v(outs[i]);
    s->nrets = 3;
    return OD_OK;
}
