/* cu_index.h — interface between the boxed CUDA indexing kernels (index.c,
 * gcc) and their launchers (index.cu, nvcc): gather, scatter, scatter_add,
 * scatter_reduce.two.
 *
 * Invariants: as cuda_kernels.h — plain C, dtypes as OD_CU_* codes, pointers
 * borrowed device addresses, launchers only enqueue. Index values were
 * checked on the host before a launch (the CPU kernel's message and order),
 * so the kernels never see one out of range; they still clamp, so a broken
 * caller cannot make them access memory outside self.
 */
#ifndef OD_CU_INDEX_H
#define OD_CU_INDEX_H

#include "cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Positions p of the index (row-major over sizes[0..ndim)), element strides:
 *   gather : out[p] (contiguous) = self[obase(p) + index[p] * dstride]
 *   scatter: out[obase(p) + index[p] * dstride] (reduce)= src[p] or value,
 * where obase(p) = sum over k != dim of p_k * ostr[k]. reduce is an
 * od_scatter_reduce; count, where od_cu_scatter_needs_count says so, is
 * zeroed scratch of out_numel. */
typedef struct od_cu_scatter_args {
    int32_t gather, reduce, include_self, dtype;
    int32_t ndim, dim;
    int64_t sizes[OD_CU_MAX_DIMS];
    int64_t istr[OD_CU_MAX_DIMS], sstr[OD_CU_MAX_DIMS], ostr[OD_CU_MAX_DIMS];
    int64_t dstride, limit, n, out_numel;
    const int64_t *index;
    const void *src;     /* gather: self; scatter: src, NULL for the value */
    void *out;
    int64_t *count;
    int32_t value_is_int; /* the value: vi when integral (or bool), else vd */
    int64_t vi;
    double vd;
    int sm_count;
} od_cu_scatter_args;

cudaError_t od_cu_scatter(const od_cu_scatter_args *a, cudaStream_t st);
/* Whether od_cu_scatter needs count (zeroed, out_numel int64): mean's
 * counts, or the plain scatter's elected writers on the parallel path. */
bool od_cu_scatter_needs_count(const od_cu_scatter_args *a);

/* out (contiguous, numel n) = self's elements at flat positions idx[i]
 * (row-major over self's sizes, strides in elements), idx checked to lie in
 * [-numel, numel) and wrapped here. */
typedef struct od_cu_take_args {
    const void *self;
    void *out;
    const int64_t *idx;  /* contiguous, n entries */
    int32_t elem_size, ndim;
    int64_t sizes[OD_CU_MAX_DIMS], strides[OD_CU_MAX_DIMS];
    int64_t n, numel;
    int sm_count;
} od_cu_take_args;

cudaError_t od_cu_take(const od_cu_take_args *a, cudaStream_t st);

/* searchsorted / bucketize (search.c): for each of the n input values
 * (contiguous, dtype `dtype`, the common dtype; or one constant, in xd / xi,
 * when in is NULL) the first position of its boundary row (row i / inner,
 * or 0 when one_row; rows of len, contiguous in dtype, permuted by sorter
 * when it is non-NULL: contiguous int64, checked to lie in [0, len)) whose
 * value is not < (left) / not <= (right) it; out is int64, or int32. */
typedef struct od_cu_search_args {
    const void *bd, *in;
    const int64_t *sorter;
    void *out;
    int32_t dtype, out_int32, right, one_row;
    double xd;
    int64_t xi;
    int64_t n, len, inner;
    int sm_count;
} od_cu_search_args;

cudaError_t od_cu_search(const od_cu_search_args *a, cudaStream_t st);

/* reflection / replication padding (search.c): out (contiguous, sizes,
 * ndim dims, numel n) element i copies self's element (strides in
 * elements) at the same leading indices and, along padded dim k (input dim
 * lead + k), the source index of ATen's loops for in[k] and pad_l[k]. */
typedef struct od_cu_pad_args {
    const void *self;
    void *out;
    int32_t elem_size, ndim, lead, nd, reflect;
    int64_t sizes[OD_CU_MAX_DIMS], strides[OD_CU_MAX_DIMS];
    int64_t in[3], pad_l[3];
    int64_t n;
    int sm_count;
} od_cu_pad_args;

cudaError_t od_cu_pad(const od_cu_pad_args *a, cudaStream_t st);

/* out[0] = the first position p < n (row-major) with idx[p] outside [lo, hi),
 * or -1; out[1] = idx[out[0]] when there is one. idx, out: device memory
 * (out: 2 int64, borrowed). */
cudaError_t od_cu_index_first_bad(const int64_t *idx, int64_t n, int64_t lo, int64_t hi, int64_t *out,
                                  int sm_count, cudaStream_t st);

/* out (strided: self for masked_fill_; sizes[0..ndim)) elements whose mask element (strided,
 * broadcast: stride 0) reads non-zero become the value (raw bytes, es wide).
 * A non-bool mask is read by its first byte; one above 1 sets flag[0]. */
typedef struct od_cu_masked_fill_args {
    void *out;
    const void *mask;
    int32_t es, mask_es, mask_is_bool, ndim;
    int64_t sizes[OD_CU_MAX_DIMS], mstr[OD_CU_MAX_DIMS], ostr[OD_CU_MAX_DIMS];
    int64_t n;
    uint64_t value;
    int64_t *flag;
    int sm_count;
} od_cu_masked_fill_args;

cudaError_t od_cu_masked_fill(const od_cu_masked_fill_args *a, cudaStream_t st);

/* nonzero of self (dtype, sizes, element strides): count pass adds the
 * number of non-zero elements to *count; write pass fills out (contiguous
 * [count, ndim] int64) in row-major order. */
typedef struct od_cu_nonzero_args {
    const void *self;
    int32_t dtype, ndim;
    int64_t sizes[OD_CU_MAX_DIMS], strides[OD_CU_MAX_DIMS];
    int64_t n;
    int64_t *out;
    int64_t *count;
    int sm_count;
} od_cu_nonzero_args;

cudaError_t od_cu_nonzero_count(const od_cu_nonzero_args *a, cudaStream_t st);
cudaError_t od_cu_nonzero_write(const od_cu_nonzero_args *a, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
