/* cpu_testutil.h — helpers for the CPU kernel tests (test_cpu_*.c) on top of
 * composite_testutil.h (seeded RNG, element access by index arithmetic,
 * dispatcher calls): random non-contiguous layouts, casts as torch performs
 * them (computed here, independently of the library), and comparisons.
 */
#ifndef CPU_TESTUTIL_H
#define CPU_TESTUTIL_H

#include "composite_testutil.h"

/* Each test binary uses a different subset of these helpers. */
#define CPU_TU static __attribute__((unused))

/* A random tensor with logical sizes `sizes` whose storage order is a random
 * permutation of its dims, some of them strided (every other element), so
 * the result is generally not contiguous. mode 0: plain contiguous. */
CPU_TU od_tensor *t_rand_layout(const int64_t *sizes, int nd, od_dtype dt, int mode)
{
    if (nd == 0 || mode == 0)
        return t_rand(sizes, nd, dt);
    int perm[OD_MAX_DIMS], inv[OD_MAX_DIMS];
    int64_t step[OD_MAX_DIMS], bs[OD_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        perm[i] = i;
    for (int i = nd - 1; i > 0; i--) {
        int j = (int)rng_int(0, i);
        int tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
    for (int i = 0; i < nd; i++) {
        step[i] = rng_next() % 2 ? 2 : 1;
        bs[i] = sizes[perm[i]] * step[i];
        inv[perm[i]] = i;
    }
    od_tensor *cur = t_rand(bs, nd, dt);
    for (int i = 0; i < nd; i++) {
        if (step[i] == 1)
            continue;
        od_tensor *v = NULL;
        OKCALL(od_tensor_slice(cur, i, 0, bs[i], 2, &v, &e_));
        od_tensor_release(cur);
        cur = v;
    }
    int64_t dims[OD_MAX_DIMS];
    for (int j = 0; j < nd; j++)
        dims[j] = inv[j];
    od_tensor *p = NULL;
    OKCALL(od_tensor_permute(cur, dims, nd, &p, &e_));
    od_tensor_release(cur);
    TCHECK(same_shape(p, sizes, nd), "t_rand_layout made the wrong shape");
    return p;
}

/* Layout 0 (contiguous) a third of the time, else a random one. */
CPU_TU od_tensor *t_rand_any(const int64_t *sizes, int nd, od_dtype dt)
{
    return t_rand_layout(sizes, nd, dt, rng_next() % 3 ? 1 : 0);
}

CPU_TU double dtype_eps(od_dtype dt)
{
    switch (dt) {
    case OD_FLOAT16: return ldexp(1.0, -10);
    case OD_BFLOAT16: return ldexp(1.0, -7);
    case OD_FLOAT32: return ldexp(1.0, -23);
    case OD_FLOAT64: return ldexp(1.0, -52);
    default: return 0.0;
    }
}

/* Wraps an integer to the width of an integer dtype (torch's modular casts). */
CPU_TU int64_t wrap_to(int64_t v, od_dtype dt)
{
    switch (dt) {
    case OD_BOOL: return v != 0;
    case OD_UINT8: return (int64_t)(uint8_t)(uint64_t)v;
    case OD_INT8: return (int64_t)(int8_t)(uint8_t)(uint64_t)v;
    case OD_INT16: return (int64_t)(int16_t)(uint16_t)(uint64_t)v;
    case OD_INT32: return (int64_t)(int32_t)(uint32_t)(uint64_t)v;
    default: return v;
    }
}

/* Value v (exact in `from`) cast to dtype `to` the way torch casts. The test
 * data keeps floats well inside every integer range. */
CPU_TU double cast_value(double v, od_dtype to)
{
    switch (to) {
    case OD_BOOL: return v != 0;
    case OD_FLOAT16: return to_half_value(v);
    case OD_BFLOAT16: return to_bf16_value(v);
    case OD_FLOAT32: return (float)v;
    case OD_FLOAT64: return v;
    default: return (double)wrap_to((int64_t)trunc(v), to);
    }
}

/* got ~= ref within tol; NaN matches NaN, inf matches the same inf. */
CPU_TU bool close_to(double got, double ref, double tol)
{
    if (isnan(ref))
        return isnan(got);
    if (isinf(ref))
        return got == ref;
    return fabs(got - ref) <= tol;
}

CPU_TU const char *dtn(od_dtype dt) { return od_dtype_name(dt); }

/* Tensor values in `vals` (numel of t, row-major), representable in t's dtype. */
CPU_TU void set_all(od_tensor *t, const double *vals)
{
    if (od_tensor_numel(t) == 0)
        return;
    int64_t idx[OD_MAX_DIMS] = {0}, i = 0;
    do
        set_d(t, idx, vals[i++]);
    while (next_index(idx, t->sizes, t->ndim));
}

/* Row-major copy of t's values as doubles (malloc'd, new). */
CPU_TU double *get_all(const od_tensor *t)
{
    int64_t n = od_tensor_numel(t);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    cr_assert(v);
    if (n == 0)
        return v;
    int64_t idx[OD_MAX_DIMS] = {0}, i = 0;
    do
        v[i++] = get_d(t, idx);
    while (next_index(idx, t->sizes, t->ndim));
    return v;
}

CPU_TU int64_t *get_all_i(const od_tensor *t)
{
    int64_t n = od_tensor_numel(t);
    int64_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    cr_assert(v);
    if (n == 0)
        return v;
    int64_t idx[OD_MAX_DIMS] = {0}, i = 0;
    do
        v[i++] = get_i(t, idx);
    while (next_index(idx, t->sizes, t->ndim));
    return v;
}

static const od_dtype FLOAT_DTS[] = {OD_FLOAT32, OD_FLOAT64, OD_FLOAT16, OD_BFLOAT16};
static const od_dtype ALL_DTS[] = {OD_BOOL,  OD_UINT8,   OD_INT8,     OD_INT16,   OD_INT32,
                                   OD_INT64, OD_FLOAT16, OD_BFLOAT16, OD_FLOAT32, OD_FLOAT64};
#define PICK(arr) (arr[rng_next() % (sizeof(arr) / sizeof(arr[0]))])

#endif
