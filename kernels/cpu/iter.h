/* iter.h — a strided N-d iterator for the CPU kernels (TensorIterator-lite).
 *
 * Invariants:
 *  - Operand 0 is the output; every operand's shape broadcasts to the
 *    iteration shape (broadcast dims get byte stride 0).
 *  - After od_cpu_iter_build, dims of size 1 are gone, dims are ordered by
 *    the output's strides (innermost = smallest), and adjacent dims that are
 *    one contiguous run for every operand are merged; sizes[0] is the
 *    innermost dim. numel == 0 means nothing will be called.
 *  - An inner loop gets n elements and one byte stride per operand; it must
 *    be a pure function of its arguments (it may run on several threads at
 *    once over disjoint ranges of the output).
 *  - Private to kernels/cpu/, but for the single-element loaders, which the
 *    CUDA backend's host side reads host copies with too (cuda/range.c).
 */
#ifndef OD_CPU_ITER_H
#define OD_CPU_ITER_H

#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

#include "od_error.h"
#include "od_half.h"
#include "od_math.h"
#include "od_tensor.h"
#include "od_value.h"

#define OD_CPU_ITER_MAX_OPS 4
/* Elements per parallel chunk: below this a loop runs on the calling thread. */
#define OD_CPU_GRAIN 32768

typedef struct od_cpu_operand {
    char *data;             /* element [0, ..., 0]; borrowed */
    int ndim;
    const int64_t *sizes;   /* borrowed; unread when ndim == 0 */
    const int64_t *strides; /* in elements; borrowed */
    size_t elsize;
} od_cpu_operand;

/* t borrowed; the operand borrows t's sizes, strides and data. */
static inline od_cpu_operand od_cpu_operand_of(const od_tensor *t)
{
    od_cpu_operand o = {(char *)od_tensor_data(t), t->ndim, t->sizes, t->strides,
                        od_dtype_size(t->dtype)};
    return o;
}

/* A scalar held in buf (borrowed; it must outlive the run): every element reads it. */
static inline od_cpu_operand od_cpu_operand_scalar(void *buf, size_t elsize)
{
    od_cpu_operand o = {(char *)buf, 0, NULL, NULL, elsize};
    return o;
}

/* data[k]: operand k's first element of the run; strides[k]: its byte stride. */
typedef void (*od_cpu_loop_fn)(void *ctx, char **data, const int64_t *strides, int64_t n);

typedef struct od_cpu_iter {
    int nops;
    int ndim;
    int64_t numel;
    int64_t sizes[OD_MAX_DIMS];                         /* [0] innermost */
    int64_t strides[OD_MAX_DIMS][OD_CPU_ITER_MAX_OPS]; /* bytes */
    char *data[OD_CPU_ITER_MAX_OPS];
} od_cpu_iter;

/* Builds the iteration over shape[0..ndim) (borrowed) for ops[0..nops)
 * (borrowed; ops[0] the output). OD_EINTERNAL when an operand does not
 * broadcast (shape functions check that first). */
od_status od_cpu_iter_build(od_cpu_iter *it, const int64_t *shape, int ndim, const od_cpu_operand *ops,
                            int nops, od_error *err);

/* Calls fn over every element, split across threads in chunks of at least
 * grain elements (grain <= 0: on the calling thread only). ctx borrowed. */
void od_cpu_iter_run(const od_cpu_iter *it, od_cpu_loop_fn fn, void *ctx, int64_t grain);

/* ---- single elements, for the kernels that read one at a time (search,
 * unique, masked, factory) ---- */

/* Element p (borrowed) of an integer dtype or bool (int64 for any other). */
static inline int64_t od_cpu_load_int_(const void *p, od_dtype dt)
{
    switch (dt) {
    case OD_BOOL: return *(const bool *)p;
    case OD_UINT8: return *(const uint8_t *)p;
    case OD_INT8: return *(const int8_t *)p;
    case OD_INT16: return *(const int16_t *)p;
    case OD_INT32: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
    }
}

/* Element p (borrowed) of a floating dtype (float64 for any other). */
static inline double od_cpu_load_flt_(const void *p, od_dtype dt)
{
    switch (dt) {
    case OD_FLOAT16: return od_half_to_float(*(const uint16_t *)p);
    case OD_BFLOAT16: return od_bf16_to_float(*(const uint16_t *)p);
    case OD_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
    }
}

/* Element i of the floating buffer p (borrowed; float64 for any other
 * dtype) as a double; v stored there rounded to dt; v as dt would hold it.
 * For kernels that compute each element in double and keep torch's rounding
 * of the storage type between steps. */
static inline double od_cpu_flt_at(const void *p, od_dtype dt, int64_t i)
{
    switch (dt) {
    case OD_FLOAT16: return od_half_to_float(((const uint16_t *)p)[i]);
    case OD_BFLOAT16: return od_bf16_to_float(((const uint16_t *)p)[i]);
    case OD_FLOAT32: return ((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

static inline void od_cpu_flt_set(void *p, od_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case OD_FLOAT16: ((uint16_t *)p)[i] = od_float_to_half((float)v); break;
    case OD_BFLOAT16: ((uint16_t *)p)[i] = od_float_to_bf16((float)v); break;
    case OD_FLOAT32: ((float *)p)[i] = (float)v; break;
    default: ((double *)p)[i] = v; break;
    }
}

static inline double od_cpu_flt_round(od_dtype dt, double v)
{
    switch (dt) {
    case OD_FLOAT16: return od_half_to_float(od_float_to_half((float)v));
    case OD_BFLOAT16: return od_bf16_to_float(od_float_to_bf16((float)v));
    case OD_FLOAT32: return (double)(float)v;
    default: return v;
    }
}

/* od_dtype_is_floating, inlined for the per-element loops that load */
static inline bool od_cpu_is_flt_(od_dtype dt)
{
    return dt == OD_FLOAT16 || dt == OD_BFLOAT16 || dt == OD_FLOAT32 || dt == OD_FLOAT64;
}

/* Element p (borrowed) of dtype dt as a double: exact for every dtype but
 * int64 beyond 2^53; bool is 0 or 1. Inline: per-element loops call it. */
static inline double od_cpu_load_f64(const void *p, od_dtype dt)
{
    return od_cpu_is_flt_(dt) ? od_cpu_load_flt_(p, dt) : (double)od_cpu_load_int_(p, dt);
}

/* Element p (borrowed) of dtype dt as an int64: exact for the integer dtypes
 * and bool; a floating one converts as torch's cast does (truncation). */
static inline int64_t od_cpu_load_i64(const void *p, od_dtype dt)
{
    return od_cpu_is_flt_(dt) ? od_double_to_i64(od_cpu_load_flt_(p, dt)) : od_cpu_load_int_(p, dt);
}

/* Element p (borrowed) of dtype dt as the Scalar Tensor.item() gives: bool,
 * int (integer dtypes) or double (floating ones). */
od_value od_cpu_load_value(const void *p, od_dtype dt);
/* The storage offset, in elements from t's first, of t's row-major element
 * i (0 <= i < numel); t borrowed. */
int64_t od_cpu_offset_of(const od_tensor *t, int64_t i);

/* ---- element traits: per dtype X, the storage type OD_CPU_T_X, the compute
 * family OD_CPU_FAM_X (i64, f32 or f64: see kernels/od_math.h), a load into
 * the family's type and a store from it (integers wrap, halves round). ---- */

#define OD_CPU_CT_i64 int64_t
#define OD_CPU_CT_f32 float
#define OD_CPU_CT_f64 double

#define OD_CPU_T_BOOL bool
#define OD_CPU_T_UINT8 uint8_t
#define OD_CPU_T_INT8 int8_t
#define OD_CPU_T_INT16 int16_t
#define OD_CPU_T_INT32 int32_t
#define OD_CPU_T_INT64 int64_t
#define OD_CPU_T_FLOAT16 uint16_t
#define OD_CPU_T_BFLOAT16 uint16_t
#define OD_CPU_T_FLOAT32 float
#define OD_CPU_T_FLOAT64 double

#define OD_CPU_FAM_BOOL i64
#define OD_CPU_FAM_UINT8 i64
#define OD_CPU_FAM_INT8 i64
#define OD_CPU_FAM_INT16 i64
#define OD_CPU_FAM_INT32 i64
#define OD_CPU_FAM_INT64 i64
#define OD_CPU_FAM_FLOAT16 f32
#define OD_CPU_FAM_BFLOAT16 f32
#define OD_CPU_FAM_FLOAT32 f32
#define OD_CPU_FAM_FLOAT64 f64

#define OD_CPU_LD_BOOL(v) ((int64_t)(v))
#define OD_CPU_LD_UINT8(v) ((int64_t)(v))
#define OD_CPU_LD_INT8(v) ((int64_t)(v))
#define OD_CPU_LD_INT16(v) ((int64_t)(v))
#define OD_CPU_LD_INT32(v) ((int64_t)(v))
#define OD_CPU_LD_INT64(v) ((int64_t)(v))
#define OD_CPU_LD_FLOAT16(v) od_half_to_float(v)
#define OD_CPU_LD_BFLOAT16(v) od_bf16_to_float(v)
#define OD_CPU_LD_FLOAT32(v) (v)
#define OD_CPU_LD_FLOAT64(v) (v)

/* A value of the compute family rounded to the dtype where ATen's CPU kernels
 * round it: c10::Half and c10::BFloat16 arithmetic rounds every operation to
 * 16 bits (a product alpha * b, a quotient before trunc), everything else
 * computes in its own type. */
#define OD_CPU_RND_BOOL(x) (x)
#define OD_CPU_RND_UINT8(x) (x)
#define OD_CPU_RND_INT8(x) (x)
#define OD_CPU_RND_INT16(x) (x)
#define OD_CPU_RND_INT32(x) (x)
#define OD_CPU_RND_INT64(x) (x)
#define OD_CPU_RND_FLOAT16(x) od_half_to_float(od_float_to_half(x))
#define OD_CPU_RND_BFLOAT16(x) od_bf16_to_float(od_float_to_bf16(x))
#define OD_CPU_RND_FLOAT32(x) (x)
#define OD_CPU_RND_FLOAT64(x) (x)

#define OD_CPU_ST_BOOL(x) ((x) != 0)
#define OD_CPU_ST_UINT8(x) ((uint8_t)(x))
#define OD_CPU_ST_INT8(x) ((int8_t)(x))
#define OD_CPU_ST_INT16(x) ((int16_t)(x))
#define OD_CPU_ST_INT32(x) ((int32_t)(x))
#define OD_CPU_ST_INT64(x) ((int64_t)(x))
#define OD_CPU_ST_FLOAT16(x) od_float_to_half(x)
#define OD_CPU_ST_BFLOAT16(x) od_float_to_bf16(x)
#define OD_CPU_ST_FLOAT32(x) (x)
#define OD_CPU_ST_FLOAT64(x) (x)

/* Stores of a value from the other kind of family (dtype conversion), with
 * torch's x86 casts: float -> integer truncates (via int32 for <= 32-bit
 * dtypes; out of range and NaN give INT_MIN's low bits); -> bool is != 0. */
#define OD_CPU_FROM_F64_BOOL(d) ((d) != 0)
#define OD_CPU_FROM_F64_UINT8(d) ((uint8_t)od_math_f64_to_i32(d))
#define OD_CPU_FROM_F64_INT8(d) ((int8_t)od_math_f64_to_i32(d))
#define OD_CPU_FROM_F64_INT16(d) ((int16_t)od_math_f64_to_i32(d))
#define OD_CPU_FROM_F64_INT32(d) (od_math_f64_to_i32(d))
#define OD_CPU_FROM_F64_INT64(d) (od_double_to_i64(d))
#define OD_CPU_FROM_F64_FLOAT16(d) od_double_to_half(d)
#define OD_CPU_FROM_F64_BFLOAT16(d) od_double_to_bf16(d)
#define OD_CPU_FROM_F64_FLOAT32(d) ((float)(d))
#define OD_CPU_FROM_F64_FLOAT64(d) ((double)(d))

#define OD_CPU_FROM_I64_BOOL(i) ((i) != 0)
#define OD_CPU_FROM_I64_UINT8(i) ((uint8_t)(i))
#define OD_CPU_FROM_I64_INT8(i) ((int8_t)(i))
#define OD_CPU_FROM_I64_INT16(i) ((int16_t)(i))
#define OD_CPU_FROM_I64_INT32(i) ((int32_t)(i))
#define OD_CPU_FROM_I64_INT64(i) ((int64_t)(i))
#define OD_CPU_FROM_I64_FLOAT16(i) od_float_to_half((float)(i))
#define OD_CPU_FROM_I64_BFLOAT16(i) od_float_to_bf16((float)(i))
#define OD_CPU_FROM_I64_FLOAT32(i) ((float)(i))
#define OD_CPU_FROM_I64_FLOAT64(i) ((double)(i))

/* X-lists of dtype suffixes. */
#define OD_CPU_ALL_DTYPES(X) \
    X(BOOL) X(UINT8) X(INT8) X(INT16) X(INT32) X(INT64) X(FLOAT16) X(BFLOAT16) X(FLOAT32) X(FLOAT64)
#define OD_CPU_FLOAT_DTYPES(X) X(FLOAT16) X(BFLOAT16) X(FLOAT32) X(FLOAT64)

#define OD_CPU_CAT_(a, b) a##b
#define OD_CPU_CAT(a, b) OD_CPU_CAT_(a, b)

#endif
