/* gpu_testutil.h — helpers for the CUDA backend's tests (tests/gpu/).
 *
 * A seeded RNG (OD_TEST_SEED or /dev/urandom; the seed is printed in every
 * failure), CPU tensors filled with fresh random values of any dtype, views
 * (transpose, slice), element reads into double by this file's own decoding
 * of float16 / bfloat16 (independent of the library's converters), and the
 * normwise comparison ||out - ref|| / ||ref|| used against the CPU kernels.
 * Everything is static: each test file is its own binary.
 */
#ifndef GPU_TESTUTIL_H
#define GPU_TESTUTIL_H

#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    cr_assert_fail("%s:%d [seed %" PRIu64 "; rerun with OD_TEST_SEED=%" PRIu64 "] %s", file, line,
                   g_seed, g_seed, msg);
    abort();
}

#define TCHECK(cond, ...)                                 \
    do {                                                  \
        if (!(cond))                                      \
            tcheck_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/* Runs expr (an od_status expression using od_error e_) and requires OD_OK. */
#define OKCALL(expr)                                                                          \
    do {                                                                                      \
        od_error e_;                                                                          \
        od_error_clear(&e_);                                                                  \
        od_status st_ = (expr);                                                               \
        TCHECK(st_ == OD_OK, "%s failed: %s (%s)", #expr, od_status_code(st_), e_.message);   \
    } while (0)

static inline uint64_t rng_next(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double rng_unit(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }
static inline int64_t rng_int(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

static inline void seed_init(void)
{
    const char *e = getenv("OD_TEST_SEED");
    if (e && *e) {
        g_seed = strtoull(e, NULL, 10);
    } else {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&g_seed, sizeof g_seed, 1, f) != 1)
            g_seed = (uint64_t)time(NULL) ^ (uint64_t)clock();
        if (f)
            fclose(f);
    }
    g_rng = g_seed;
}

/* ---- element access (own decoding) ------------------------------------------------------- */

static inline double tu_half_to_double(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0)
        v = ldexp((double)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((double)(m | 1024), e - 25);
    return sign ? -v : v;
}

static inline double tu_bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element i (row-major over t's shape) of a CPU tensor, as double. */
static inline double tu_get(const od_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t sz = t->sizes[d];
        off += (i % sz) * t->strides[d];
        i /= sz;
    }
    const char *p = (const char *)od_tensor_data(t) + off * (int64_t)od_dtype_size(t->dtype);
    switch (t->dtype) {
    case OD_BOOL: return *(const uint8_t *)p != 0;
    case OD_UINT8: return *(const uint8_t *)p;
    case OD_INT8: return *(const int8_t *)p;
    case OD_INT16: return *(const int16_t *)p;
    case OD_INT32: return *(const int32_t *)p;
    case OD_INT64: return (double)*(const int64_t *)p;
    case OD_FLOAT16: return tu_half_to_double(*(const uint16_t *)p);
    case OD_BFLOAT16: return tu_bf16_to_double(*(const uint16_t *)p);
    case OD_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

static inline int64_t tu_get_i64(const od_tensor *t, int64_t i)
{
    if (t->dtype != OD_INT64)
        return (int64_t)tu_get(t, i);
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->sizes[d]) * t->strides[d];
        i /= t->sizes[d];
    }
    return ((const int64_t *)od_tensor_data(t))[off];
}

/* Writes raw random bits of a "nice" value into a contiguous CPU tensor:
 * floats uniform in [lo, hi], integers uniform in [ilo, ihi] (clipped to
 * the dtype), bools fair coins. */
static inline void tu_fill(od_tensor *t, double lo, double hi, int64_t ilo, int64_t ihi)
{
    int64_t n = od_tensor_numel(t);
    char *p = od_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        double v = lo + (hi - lo) * rng_unit();
        int64_t iv = rng_int(ilo, ihi);
        switch (t->dtype) {
        case OD_BOOL: ((uint8_t *)p)[i] = (uint8_t)(rng_next() & 1); break;
        case OD_UINT8: ((uint8_t *)p)[i] = (uint8_t)(iv < 0 ? -iv : iv); break;
        case OD_INT8: ((int8_t *)p)[i] = (int8_t)(iv > 127 ? 127 : iv < -128 ? -128 : iv); break;
        case OD_INT16: ((int16_t *)p)[i] = (int16_t)iv; break;
        case OD_INT32: ((int32_t *)p)[i] = (int32_t)iv; break;
        case OD_INT64: ((int64_t *)p)[i] = iv; break;
        case OD_FLOAT16: {
            /* round v to a half by truncating a float's mantissa (good enough for inputs) */
            float f = (float)v;
            uint32_t u;
            memcpy(&u, &f, sizeof u);
            uint32_t sign = (u >> 16) & 0x8000u;
            int e = (int)((u >> 23) & 0xff) - 127 + 15;
            uint16_t h = e <= 0 ? (uint16_t)sign : e >= 31 ? (uint16_t)(sign | 0x7c00u)
                                                           : (uint16_t)(sign | (uint32_t)e << 10 | ((u >> 13) & 0x3ffu));
            ((uint16_t *)p)[i] = h;
            break;
        }
        case OD_BFLOAT16: {
            float f = (float)v;
            uint32_t u;
            memcpy(&u, &f, sizeof u);
            ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
            break;
        }
        case OD_FLOAT32: ((float *)p)[i] = (float)v; break;
        default: ((double *)p)[i] = v; break;
        }
    }
}

static const od_device TU_CPU = {OD_DEV_CPU, 0};
static const od_device TU_CUDA = {OD_DEV_CUDA, 0};

/* New random contiguous CPU tensor. */
static inline od_tensor *tu_rand(const int64_t *sizes, int ndim, od_dtype dt, double lo, double hi)
{
    od_tensor *t = NULL;
    OKCALL(od_tensor_empty(sizes, ndim, dt, TU_CPU, &t, &e_));
    tu_fill(t, lo, hi, (int64_t)floor(lo), (int64_t)ceil(hi));
    return t;
}

/* ||a - b|| / ||b|| over every element (CPU tensors of the same shape), with
 * NaN required at the same places and infinities equal. Returns the ratio
 * (0 when both are zero); *bad_nan set when NaN / inf positions differ. */
static inline double tu_rel_err(const od_tensor *a, const od_tensor *b, int64_t *bad_at)
{
    int64_t n = od_tensor_numel(b);
    double num = 0, den = 0;
    *bad_at = -1;
    for (int64_t i = 0; i < n; i++) {
        double x = tu_get(a, i), y = tu_get(b, i);
        if (isnan(x) || isnan(y)) {
            if (!(isnan(x) && isnan(y)) && *bad_at < 0)
                *bad_at = i;
            continue;
        }
        if (isinf(x) || isinf(y)) {
            if (x != y && *bad_at < 0)
                *bad_at = i;
            continue;
        }
        num += (x - y) * (x - y);
        den += y * y;
    }
    if (num == 0)
        return 0;
    return den == 0 ? INFINITY : sqrt(num / den);
}

#endif
