/* composite_testutil.h — helpers for test_composite.c and test_meta.c:
 * a seeded RNG, tensor construction and element access by index
 * arithmetic, and calls through the dispatcher.
 *
 * Everything is static (each test file is its own binary). Element access
 * decodes float16 / bfloat16 with this file's own arithmetic, never with the
 * library's converters, so the reference stays independent of the code
 * under test. The seed comes from OD_TEST_SEED or /dev/urandom and is
 * printed in every failure message (TCHECK).
 */
#ifndef COMPOSITE_TESTUTIL_H
#define COMPOSITE_TESTUTIL_H

#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "od_half.h"
#include "od_ops.h"

static uint64_t g_seed, g_rng;

static inline void tcheck_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static inline void tcheck_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cr_assert_fail("%s:%d [seed %" PRIu64 "; rerun with OD_TEST_SEED=%" PRIu64 "] %s", file, line, g_seed,
                   g_seed, msg);
    abort(); /* not reached: cr_assert_fail ends the test */
}

#define TCHECK(cond, ...)                                   \
    do {                                                    \
        if (!(cond))                                        \
            tcheck_fail(__FILE__, __LINE__, __VA_ARGS__);   \
    } while (0)

#define OKCALL(expr)                                                                      \
    do {                                                                                  \
        od_error e_;                                                                      \
        od_error_clear(&e_);                                                              \
        od_status st_ = (expr);                                                           \
        (void)e_;                                                                         \
        TCHECK(st_ == OD_OK, "%s failed: %s (%s)", #expr, od_status_code(st_), e_.message); \
    } while (0)

static inline uint64_t rng_next(void)
{
    /* splitmix64 */
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double rng_unit(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }
static inline double rng_uniform(double lo, double hi) { return lo + (hi - lo) * rng_unit(); }
static inline int64_t rng_int(int64_t lo, int64_t hi) /* inclusive */
{
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

static inline void test_setup(void)
{
    const char *env = getenv("OD_TEST_SEED");
    if (env && *env) {
        g_seed = strtoull(env, NULL, 10);
    } else {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&g_seed, sizeof g_seed, 1, f) != 1)
            g_seed = (uint64_t)time(NULL) ^ (uint64_t)clock();
        if (f)
            fclose(f);
    }
    g_rng = g_seed;
    od_error err;
    od_status st = od_init(&err);
    cr_assert_eq(st, OD_OK, "od_init: %s", err.message);
}

static const od_device CPU = {OD_DEV_CPU, 0};
static const od_device META = {OD_DEV_META, 0};

/* ---- independent float16 / bfloat16 arithmetic ---- */

static inline double decode_half(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp(man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp(man | 0x400, exp - 25);
    return sign ? -v : v;
}

static inline double decode_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounds finite x to a binary format with `mant` significand bits, minimum
 * normal exponent emin (value 2^emin) and largest finite value maxv, ties to
 * even, overflowing to inf. */
static inline double round_to_format(double x, int mant, int emin, double maxv)
{
    if (isnan(x) || isinf(x) || x == 0)
        return x;
    int e;
    frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    int qexp = (e - 1 >= emin ? e - 1 : emin) - (mant - 1);
    double q = ldexp(1.0, qexp);
    double r = nearbyint(x / q) * q;
    if (fabs(r) > maxv)
        return x > 0 ? INFINITY : -INFINITY;
    return r;
}
/* torch converts to half / bfloat16 from float (c10::Half(float)). */
static inline double to_half_value(double x) { return round_to_format((float)x, 11, -14, 65504.0); }
static inline double to_bf16_value(double x)
{
    return round_to_format((float)x, 8, -126, ldexp(255.0, 120));
}

static inline uint16_t encode_half(double v) /* v already representable */
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    if (isnan(v))
        return 0x7e00;
    if (isinf(a))
        return sign | 0x7c00;
    if (a == 0)
        return sign;
    int e;
    frexp(a, &e);
    if (e - 1 < -14) /* subnormal */
        return sign | (uint16_t)(a / ldexp(1.0, -24));
    int m = (int)(a / ldexp(1.0, e - 11)) & 0x3ff;
    return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)m;
}

static inline uint16_t encode_bf16(double v) /* v already representable */
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (isnan(f))
        return 0x7fc0;
    return (uint16_t)(u >> 16);
}

/* ---- element access by index arithmetic ---- */

static inline void *elem_ptr(const od_tensor *t, const int64_t *idx)
{
    int64_t off = t->offset;
    for (int d = 0; d < t->ndim; d++)
        off += idx[d] * t->strides[d];
    return (char *)t->storage->data + off * (int64_t)od_dtype_size(t->dtype);
}

static inline double get_d(const od_tensor *t, const int64_t *idx)
{
    void *p = elem_ptr(t, idx);
    switch (t->dtype) {
    case OD_BOOL: return *(bool *)p;
    case OD_UINT8: return *(uint8_t *)p;
    case OD_INT8: return *(int8_t *)p;
    case OD_INT16: return *(int16_t *)p;
    case OD_INT32: return *(int32_t *)p;
    case OD_INT64: return (double)*(int64_t *)p;
    case OD_FLOAT16: return decode_half(*(uint16_t *)p);
    case OD_BFLOAT16: return decode_bf16(*(uint16_t *)p);
    case OD_FLOAT32: return *(float *)p;
    case OD_FLOAT64: return *(double *)p;
    default: return NAN;
    }
}

static inline int64_t get_i(const od_tensor *t, const int64_t *idx)
{
    void *p = elem_ptr(t, idx);
    switch (t->dtype) {
    case OD_BOOL: return *(bool *)p;
    case OD_UINT8: return *(uint8_t *)p;
    case OD_INT8: return *(int8_t *)p;
    case OD_INT16: return *(int16_t *)p;
    case OD_INT32: return *(int32_t *)p;
    case OD_INT64: return *(int64_t *)p;
    default: return od_double_to_i64(get_d(t, idx)); /* NaN, inf: defined, as on x86 */
    }
}

/* v must already be representable in t's dtype (see the rounding helpers). */
static inline void set_d(od_tensor *t, const int64_t *idx, double v)
{
    void *p = elem_ptr(t, idx);
    switch (t->dtype) {
    case OD_BOOL: *(bool *)p = v != 0; break;
    case OD_UINT8: *(uint8_t *)p = (uint8_t)v; break;
    case OD_INT8: *(int8_t *)p = (int8_t)v; break;
    case OD_INT16: *(int16_t *)p = (int16_t)v; break;
    case OD_INT32: *(int32_t *)p = (int32_t)v; break;
    case OD_INT64: *(int64_t *)p = (int64_t)v; break;
    case OD_FLOAT16: *(uint16_t *)p = encode_half(v); break;
    case OD_BFLOAT16: *(uint16_t *)p = encode_bf16(v); break;
    case OD_FLOAT32: *(float *)p = (float)v; break;
    case OD_FLOAT64: *(double *)p = v; break;
    default: break;
    }
}

static inline void set_i(od_tensor *t, const int64_t *idx, int64_t v)
{
    void *p = elem_ptr(t, idx);
    switch (t->dtype) {
    case OD_INT64: *(int64_t *)p = v; break;
    default: set_d(t, idx, (double)v); break;
    }
}

/* Advances idx over sizes in row-major order; false after the last. */
static inline bool next_index(int64_t *idx, const int64_t *sizes, int ndim)
{
    for (int d = ndim - 1; d >= 0; d--) {
        if (++idx[d] < sizes[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

static inline int64_t numel_of(const int64_t *sizes, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= sizes[d];
    return n;
}

static inline od_tensor *t_empty(const int64_t *sizes, int ndim, od_dtype dt, od_device dev)
{
    od_tensor *t = NULL;
    OKCALL(od_tensor_empty(sizes, ndim, dt, dev, &t, &e_));
    return t;
}

/* A random value exactly representable in dt. */
static inline double rand_value(od_dtype dt)
{
    switch (dt) {
    case OD_BOOL: return (double)(rng_next() & 1);
    case OD_UINT8: return (double)rng_int(0, 255);
    case OD_INT8: return (double)rng_int(-128, 127);
    case OD_INT16: return (double)rng_int(-32768, 32767);
    case OD_INT32: return (double)rng_int(-100000, 100000);
    case OD_INT64: return (double)rng_int(-1000000, 1000000);
    case OD_FLOAT16: return to_half_value(rng_uniform(-4, 4));
    case OD_BFLOAT16: return to_bf16_value(rng_uniform(-4, 4));
    case OD_FLOAT32: return (float)rng_uniform(-4, 4);
    default: return rng_uniform(-4, 4);
    }
}

static inline void fill_random(od_tensor *t)
{
    if (od_tensor_numel(t) == 0)
        return;
    int64_t idx[OD_MAX_DIMS] = {0};
    do
        set_d(t, idx, rand_value(t->dtype));
    while (next_index(idx, t->sizes, t->ndim));
}

static inline od_tensor *t_rand(const int64_t *sizes, int ndim, od_dtype dt)
{
    od_tensor *t = t_empty(sizes, ndim, dt, CPU);
    fill_random(t);
    return t;
}

/* Random sizes in [lo, hi] for ndim dims. */
static inline void rand_sizes(int64_t *sizes, int ndim, int64_t lo, int64_t hi)
{
    for (int d = 0; d < ndim; d++)
        sizes[d] = rng_int(lo, hi);
}

/* ---- calls ---- */

static inline od_status call_id(od_opid id, od_value *args, int n, od_stack *s, od_error *err)
{
    od_error_clear(err);
    return od_call_builtin(id, args, n, s, err);
}

/* Runs id, expects success and one tensor; returns it (new). */
static inline od_tensor *call1_ok(od_opid id, od_value *args, int n)
{
    od_stack s;
    od_error err;
    od_status st = call_id(id, args, n, &s, &err);
    TCHECK(st == OD_OK, "%s failed: %s (%s)", od_op_name(od_builtin(id)), od_status_code(st),
           err.message);
    TCHECK(s.nrets == 1 && s.rets[0].tag == OD_T_TENSOR, "%s: expected one tensor, got %d values",
           od_op_name(od_builtin(id)), s.nrets);
    return s.rets[0].u.t;
}

/* Runs id, expects failure with status want (or any error when want is OD_OK)
 * and a message containing needle (when non-NULL). */
static inline void call_fails(od_opid id, od_value *args, int n, od_status want, const char *needle)
{
    od_stack s;
    od_error err;
    od_status st = call_id(id, args, n, &s, &err);
    if (st == OD_OK)
        od_stack_release_rets(&s);
    TCHECK(st != OD_OK, "%s unexpectedly succeeded (wanted %s)", od_op_name(od_builtin(id)),
           needle ? needle : od_status_code(want));
    TCHECK(s.nrets == 0, "%s failed but left %d returns", od_op_name(od_builtin(id)), s.nrets);
    TCHECK(want == OD_OK || st == want, "%s: status %s, wanted %s (%s)", od_op_name(od_builtin(id)),
           od_status_code(st), od_status_code(want), err.message);
    TCHECK(!needle || strstr(err.message, needle), "%s: message \"%s\" lacks \"%s\"",
           od_op_name(od_builtin(id)), err.message, needle);
}

static inline bool same_shape(const od_tensor *t, const int64_t *sizes, int ndim)
{
    if (t->ndim != ndim)
        return false;
    for (int d = 0; d < ndim; d++)
        if (t->sizes[d] != sizes[d])
            return false;
    return true;
}

static inline const char *shape_str(const int64_t *sizes, int ndim, char *buf, size_t cap)
{
    od_shape_print(sizes, ndim, buf, cap);
    return buf;
}

static inline od_value ilist(const int64_t *v, int n) { return od_list_v(OD_T_INT_LIST, (void *)v, (size_t)n); }
static inline od_value tv(od_tensor *t) { return od_tensor_v(t); }

#endif
