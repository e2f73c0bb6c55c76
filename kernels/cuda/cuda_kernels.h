/* cuda_kernels.h — private interface between the boxed CUDA kernels (.c,
 * compiled by gcc) and the device launchers (.cu, compiled by nvcc).
 *
 * Invariants:
 *  - Plain C, extern "C"-safe, and free of od_tensor.h (whose <stdatomic.h>
 *    C++ cannot include): dtypes cross as OD_CU_* codes, which util.c checks
 *    equal to od_dtype at compile time.
 *  - Launchers only enqueue work on the stream they are given and return the
 *    launch's cudaError_t; they never synchronize, allocate, or fail on user
 *    data. Everything that can be wrong with a request was checked on the
 *    host before (shape functions, od_cu_* helpers), except data-dependent
 *    errors (integer division by zero, index out of range), which a kernel
 *    reports through a device-visible flag the caller reads after syncing.
 *  - Pointers passed in are borrowed device pointers that stay valid until
 *    the caller has synchronized the stream.
 *  - Only files of kernels/cuda/ (and the CUDA tests and benchmarks) include
 *    this header.
 */
#ifndef OD_CUDA_KERNELS_H
#define OD_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mirrors od_dtype (same order, checked in util.c). */
enum {
    OD_CU_BOOL,
    OD_CU_UINT8,
    OD_CU_INT8,
    OD_CU_INT16,
    OD_CU_INT32,
    OD_CU_INT64,
    OD_CU_FLOAT16,
    OD_CU_BFLOAT16,
    OD_CU_FLOAT32,
    OD_CU_FLOAT64,
    OD_CU_NUM_DTYPES
};

#define OD_CU_MAX_DIMS 16 /* == OD_MAX_DIMS (checked in util.c) */
#define OD_CU_MAX_OPERANDS 4

/* ---- elementwise ------------------------------------------------------------
 * One iteration space (sizes, row-major, outermost first) shared by up to
 * four operands; operand 0 is the output. An input is either a strided view
 * (strides in elements, 0 on broadcast dims) or a constant (a Scalar
 * argument, or a 0-dim CPU tensor read on the host). */
typedef struct od_cu_operand {
    void *data;       /* device address of element [0, ..., 0]; NULL for a constant */
    int32_t dtype;    /* OD_CU_*; for a constant, the dtype its value is exact in */
    int32_t is_const;
    double cd;        /* constant value (floating families) */
    int64_t ci;       /* constant value (integer family: ints and bools) */
    int64_t strides[OD_CU_MAX_DIMS];
} od_cu_operand;

typedef struct od_cu_iter {
    int32_t ndim;   /* 0: one element */
    int32_t nops;   /* output + inputs, 1..OD_CU_MAX_OPERANDS */
    int64_t numel;
    int64_t sizes[OD_CU_MAX_DIMS];
    od_cu_operand op[OD_CU_MAX_OPERANDS];
} od_cu_iter;

/* The elementwise operations. Operand order after the output: */
typedef enum od_cu_ew {
    OD_CU_EW_COPY,        /* a: convert to the output's dtype */
    OD_CU_EW_ADD,         /* a, b: a + alpha * b */
    OD_CU_EW_SUB,         /* a, b: a - alpha * b */
    OD_CU_EW_MUL,
    OD_CU_EW_DIV,         /* true division (floating families only) */
    OD_CU_EW_DIV_TRUNC,   /* integer family: b == 0 raises the error flag */
    OD_CU_EW_DIV_FLOOR,
    OD_CU_EW_POW,
    OD_CU_EW_MAXIMUM,
    OD_CU_EW_MINIMUM,
    OD_CU_EW_EQ,          /* comparisons: output bool, computed in the compute dtype */
    OD_CU_EW_NE,
    OD_CU_EW_LT,
    OD_CU_EW_LE,
    OD_CU_EW_GT,
    OD_CU_EW_GE,
    OD_CU_EW_WHERE,       /* cond, a, b */
    OD_CU_EW_CLAMP,       /* x, lo, hi */
    OD_CU_EW_CLAMP_MIN,   /* x, lo */
    OD_CU_EW_CLAMP_MAX,   /* x, hi */
    OD_CU_EW_LERP,        /* self, end, weight (floating families) */
    OD_CU_EW_LERP_S,      /* self, end; weight = alpha */
    OD_CU_EW_ADDCMUL,     /* self, t1, t2: self + alpha * t1 * t2 */
    OD_CU_EW_ADDCDIV,     /* self, t1, t2: self + alpha * t1 / t2 (floating families) */
    OD_CU_EW_NEXTAFTER,   /* self, other (floating families) */
    OD_CU_EW_NEG,         /* unary: a */
    OD_CU_EW_ABS,
    OD_CU_EW_RELU,
    OD_CU_EW_GELU,        /* floating families only */
    OD_CU_EW_GELU_TANH,
    /* From here on, OD_CU_EW_<id> for each OD_EW1 / OD_EW2 / OD_EWP operator
     * of ops.def (inputs: self, or self and other; OD_EWP's parameters ride
     * in od_cu_ew_args), in list order; its rule (kernels/od_ew.h) says which
     * families have kernels. */
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag)
#define OD_EW1(id, schema, fn, rule, ag) OD_CU_EW_##id,
#define OD_EW2(id, schema, fn, rule, ag) OD_CU_EW_##id,
#define OD_EWP(id, schema, fn, rule, ag) OD_CU_EW_##id,
#include "ops.def"
#undef OD_OP
#undef OD_EW1
#undef OD_EW2
#undef OD_EWP
    OD_CU_EW_NUM_OPS
} od_cu_ew;

#define OD_CU_EW_GEN_FIRST (OD_CU_EW_GELU_TANH + 1)

#define OD_CU_EW_MAX_PARAMS 4 /* = OD_EW_MAX_PARAMS (kernels/od_ew.h) */

typedef struct od_cu_ew_args {
    int32_t op;        /* od_cu_ew */
    int32_t compute;   /* OD_CU_* dtype every input is cast to, whose family computes:
                        * FLOAT16/BFLOAT16/FLOAT32 in float, FLOAT64 in double, the
                        * rest in int64 */
    double alpha_d;    /* add/sub alpha, floating families */
    int64_t alpha_i;   /* add/sub alpha, integer family */
    int sm_count;      /* of the device, to size the grid */
    int64_t *flag;     /* device-visible word set to 1 by integer division by zero;
                        * may be NULL when op cannot raise it */
    double prm_d[OD_CU_EW_MAX_PARAMS];  /* an OD_EWP operator's parameters (od_ew_params), */
    int64_t prm_i[OD_CU_EW_MAX_PARAMS]; /* floating and integer families */
} od_cu_ew_args;

/* True when the launcher has a kernel for (op, compute family). */
bool od_cu_ew_supported(int op, int compute);

/* Runs it->op[0] = f(it->op[1..]) over it. it: coalesced (od_cu_iter_build),
 * numel > 0. */
cudaError_t od_cu_elementwise(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st);

/* Fills a strided view with one element of elem_size bytes (1, 2, 4 or 8).
 * it: nops == 1 (the view). bits: the value's bytes, little-endian. */
cudaError_t od_cu_fill(const od_cu_iter *it, int elem_size, uint64_t bits, int sm_count,
                       cudaStream_t st);

/* ---- factories ----------------------------------------------------------------- */

/* out[i] = start + i * step for i in [0, n), contiguous, dtype dt. Integer
 * dtypes with integral start/step compute in int64 (is_int), everything
 * else in double, then convert like a cast. */
cudaError_t od_cu_arange(void *out, int dt, int64_t n, bool is_int, double start_d, double step_d,
                         int64_t start_i, int64_t step_i, int sm_count, cudaStream_t st);

/* linspace (log == false) or logspace into contiguous out of dtype dt (n
 * elements): start + step * i below n / 2, end - step * (n - 1 - i) from
 * there, then pow(base, that) for logspace; computed in double when wide,
 * else in float (ATen's CUDA kernels step integer dtypes in float). */
cudaError_t od_cu_linspace(void *out, int dt, int64_t n, bool log, bool wide, double start, double end,
                           double step, double base, int sm_count, cudaStream_t st);

/* rand (normal == false: uniform [0, 1)) or randn into contiguous out of
 * floating dtype dt: element i uses Philox4x32-10 at (seed, offset + i). */
cudaError_t od_cu_random(void *out, int dt, int64_t n, bool normal, uint64_t seed, uint64_t offset,
                         int sm_count, cudaStream_t st);

/* ---- reductions --------------------------------------------------------------- */

typedef enum od_cu_red {
    OD_CU_RED_SUM,
    OD_CU_RED_MEAN,
    OD_CU_RED_AMAX,
    OD_CU_RED_AMIN,
    OD_CU_RED_ARGMAX,
    OD_CU_RED_VAR,
    OD_CU_RED_ARGMIN,
    OD_CU_RED_PROD
} od_cu_red;

/* A reduction over the dims of in: kept dims (the output's, row-major,
 * outermost first; strides of in) and reduced dims (row-major order of in,
 * which defines argmax's index). Dims already coalesced; output contiguous. */
typedef struct od_cu_reduce_args {
    int32_t kind;        /* od_cu_red */
    int32_t in_dtype, out_dtype;
    const void *in;
    void *out;
    int32_t nkept, nred;
    int64_t kept_sizes[OD_CU_MAX_DIMS], kept_strides[OD_CU_MAX_DIMS];
    int64_t red_sizes[OD_CU_MAX_DIMS], red_strides[OD_CU_MAX_DIMS];
    int64_t m;           /* outputs (product of kept sizes) */
    int64_t r;           /* reduced elements per output */
    double correction;   /* var */
    int sm_count;
} od_cu_reduce_args;

/* Bytes of scratch device memory the reduction needs (0: none). */
size_t od_cu_reduce_workspace(const od_cu_reduce_args *a);
/* ws: device scratch of od_cu_reduce_workspace(a) bytes (NULL when 0). */
cudaError_t od_cu_reduce(const od_cu_reduce_args *a, void *ws, cudaStream_t st);

/* ---- softmax and layer norm (contiguous inputs) ------------------------------------- */

/* Softmax or log-softmax of a contiguous [outer, dim, inner] tensor over dim. */
cudaError_t od_cu_softmax(const void *in, int in_dtype, void *out, int out_dtype, int64_t outer,
                          int64_t dim, int64_t inner, bool log, int sm_count, cudaStream_t st);

/* Layer norm of a contiguous [rows, n] tensor; weight and bias (may be NULL)
 * contiguous [n] of dtype wdt; mean and rstd contiguous [rows] of stat_dtype. */
cudaError_t od_cu_layer_norm(const void *in, int dt, const void *weight, const void *bias, int wdt,
                             void *out, void *mean, void *rstd, int stat_dtype, int64_t rows,
                             int64_t n, double eps, int sm_count, cudaStream_t st);

/* ---- indexing ------------------------------------------------------------------ */

/* out (contiguous, shape = self's with dim -> n_index) = self.index_select(dim, index).
 * self: sizes/strides (elements) of the source; index: n_index entries of
 * int32/int64 at stride index_stride. An index outside [0, self_sizes[dim])
 * writes zero there, sets flag[0] = 1 and flag[1] = one offending value. */
typedef struct od_cu_index_args {
    const void *self;
    void *out;
    int32_t elem_size;
    int32_t ndim, dim;
    int64_t self_sizes[OD_CU_MAX_DIMS], self_strides[OD_CU_MAX_DIMS];
    const void *index;
    int32_t index_dtype;
    int64_t index_stride;
    int64_t n_index;
    int64_t numel;        /* of out */
    int64_t *flag;
    int sm_count;
} od_cu_index_args;
cudaError_t od_cu_index_select(const od_cu_index_args *a, cudaStream_t st);

/* ---- scans and sorting (contiguous [outer, size, inner] inputs; scan.cu) ---------- */

enum { OD_CU_SCAN_CUMSUM, OD_CU_SCAN_CUMPROD, OD_CU_SCAN_LOGCUMSUMEXP, OD_CU_SCAN_CUMMAX, OD_CU_SCAN_CUMMIN };
/* One scan along size: y (dtype, same layout) from x (already of dtype);
 * ix (int64, same layout) for cummax/cummin, else NULL. scratch:
 * od_cu_scan_scratch bytes (NULL when 0), borrowed. */
size_t od_cu_scan_scratch(int dtype, int op, int64_t outer, int64_t size, int64_t inner);
cudaError_t od_cu_scan(const void *x, void *y, int64_t *ix, int dtype, int op, int64_t outer, int64_t size,
                       int64_t inner, void *scratch, int sm_count, cudaStream_t st);

/* Orders each line of x (dtype) along size for op (an OD_SORT_OP_*,
 * od_sort_algo.h) with a stable sort (equal keys keep their input order)
 * and writes the entries that go out (sort: size; topk: k, sorted; kthvalue:
 * the k-th smallest alone) as [outer, on, inner] values (x's dtype) and
 * int64 indices. scratch: od_cu_sort_scratch bytes (0: the sort cannot be
 * planned), borrowed. */
size_t od_cu_sort_scratch(int dtype, int64_t outer, int64_t size, int64_t inner);
cudaError_t od_cu_sort(const void *x, void *vals, int64_t *ix, int dtype, int op, int64_t outer, int64_t size,
                       int64_t inner, int64_t k, bool descending, bool sorted, void *scratch, int sm_count,
                       cudaStream_t st);

/* median.dim, nanmedian.dim, mode, median(), nanmedian() (op: an
 * OD_SORT_OP_* of od_sort_algo.h): each line of x (dtype) along size is
 * selected as the CPU kernel selects it (its algorithm replayed per line),
 * writing [outer, inner] values (x's dtype) and int64 indices (ix may be
 * NULL). scratch: od_cu_select_scratch bytes, borrowed. */
size_t od_cu_select_scratch(int64_t outer, int64_t size, int64_t inner);
cudaError_t od_cu_select(const void *x, void *vals, int64_t *ix, int dtype, int op, int64_t outer, int64_t size,
                         int64_t inner, void *scratch, int sm_count, cudaStream_t st);

/* isin: out[i] (bool, n) = element i of e is among the m of t, != invert;
 * e and t contiguous, both of dtype (the common dtype). replay: ATen's
 * sorting path with assume_unique (the CPU's sorted replay) instead of plain
 * membership. scratch: od_cu_isin_scratch bytes (0 for n == 0 or when it
 * cannot be planned), borrowed. */
size_t od_cu_isin_scratch(int64_t n, int64_t m, bool replay);
cudaError_t od_cu_isin(const void *e, int64_t n, const void *t, int64_t m, int dtype, bool replay, bool invert,
                       bool *out, void *scratch, int sm_count, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
