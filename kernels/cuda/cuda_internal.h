/* cuda_internal.h — private header of the boxed CUDA kernels (the .c files of kernels/cuda/).
 *
 * Invariants:
 *  - Compiled by gcc only (it includes od_tensor.h); the device side sees
 *    cuda_kernels.h alone.
 *  - A kernel brackets its device work with od_cu_begin (device checks,
 *    current device, this thread's stream) and od_cu_finish (stream sync +
 *    error check): every CUDA operator is synchronous, so tensors it returns
 *    are complete and scratch freed after od_cu_finish is no longer in use.
 *  - Every CUDA / cuBLAS return code goes through od_cu_status /
 *    od_cu_blas_status, which clear the runtime's non-sticky error and map
 *    the code onto od_status (out of memory -> OD_EDEVMEM, no device ->
 *    OD_EUNAVAIL, the rest -> OD_EINTERNAL) with the call site in the message.
 */
#ifndef OD_CUDA_INTERNAL_H
#define OD_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda_kernels.h"
#include "od_cuda.h"
#include "od_dispatch.h"
#include "od_ops.h"
#include "od_shape.h"
#include "od_tensor.h"

#define OD_CUDA_KERNEL_(name) \
    od_status name(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err);

/* The CUDA column of ops.def (register.c takes their addresses). */
OD_CUDA_KERNEL_(od_cuda_binary)      /* ew.c: add sub mul div pow maximum minimum */
OD_CUDA_KERNEL_(od_cuda_compare)     /* ew.c: eq ne lt le gt ge */
OD_CUDA_KERNEL_(od_cuda_where)       /* ew.c */
OD_CUDA_KERNEL_(od_cuda_pointwise)   /* ew.c: lerp addcmul addcdiv nextafter */
OD_CUDA_KERNEL_(od_cuda_equal)       /* ew.c */
OD_CUDA_KERNEL_(od_cuda_unary)       /* ew.c: neg abs relu gelu */
OD_CUDA_KERNEL_(od_cuda_clamp)       /* ew.c */
OD_CUDA_KERNEL_(od_cuda_ew)          /* ew.c: every OD_EW1 / OD_EW2 operator of ops.def */
OD_CUDA_KERNEL_(od_cuda_fill)        /* ew.c: fill_.Scalar */
OD_CUDA_KERNEL_(od_cuda_copy)        /* copy.c: clone, copy_ (any device pair) */
OD_CUDA_KERNEL_(od_cuda_cat)         /* copy.c */
OD_CUDA_KERNEL_(od_cuda_index_select)/* copy.c */
OD_CUDA_KERNEL_(od_cuda_scatter)     /* index.c: gather, scatter.*, scatter_add, scatter_reduce.two */
OD_CUDA_KERNEL_(od_cuda_masked_fill) /* index.c: masked_fill.Scalar / .Tensor */
OD_CUDA_KERNEL_(od_cuda_nonzero)     /* index.c: counts, then allocates */
OD_CUDA_KERNEL_(od_cuda_take)        /* index.c */
OD_CUDA_KERNEL_(od_cuda_search)      /* search.c: searchsorted, bucketize */
OD_CUDA_KERNEL_(od_cuda_pad)         /* search.c: reflection_pad1d..3d, replication_pad1d..3d */
OD_CUDA_KERNEL_(od_cuda_data_sized)  /* search.c: repeat_interleave.Tensor, unique_consecutive (via the host) */
OD_CUDA_KERNEL_(od_cuda_arange)      /* factory.c */
OD_CUDA_KERNEL_(od_cuda_linspace)    /* range.c: linspace, logspace */
OD_CUDA_KERNEL_(od_cuda_tri_indices) /* tril_indices, triu_indices */
OD_CUDA_KERNEL_(od_cuda_local_scalar) /* _local_scalar_dense */
OD_CUDA_KERNEL_(od_cuda_random)      /* factory.c: rand, randn */
OD_CUDA_KERNEL_(od_cuda_reduce)      /* reduce.c */
OD_CUDA_KERNEL_(od_cuda_softmax)     /* reduce.c: _softmax, _log_softmax */
OD_CUDA_KERNEL_(od_cuda_layer_norm)  /* reduce.c: native_layer_norm */
OD_CUDA_KERNEL_(od_cuda_blas)        /* blas.c: mm bmm addmm dot */
OD_CUDA_KERNEL_(od_cuda_scan)        /* scan.c: cumsum cumprod logcumsumexp cummax cummin */
OD_CUDA_KERNEL_(od_cuda_sort)        /* scan.c: sort sort.stable topk kthvalue */
OD_CUDA_KERNEL_(od_cuda_select)      /* scan.c: median nanmedian (and .dim) mode */
OD_CUDA_KERNEL_(od_cuda_isin)        /* scan.c: isin.Tensor_Tensor / Tensor_Scalar / Scalar_Tensor */
OD_CUDA_KERNEL_(od_cuda_linalg)      /* linalg.c: the LAPACK operators, staged through the host */
OD_CUDA_KERNEL_(od_cuda_norm)        /* bnorm.c: native_batch_norm, native_group_norm and their backward */
OD_CUDA_KERNEL_(od_cuda_nll_loss)    /* loss.c: nll_loss_forward, nll_loss2d_forward and their _backward */
OD_CUDA_KERNEL_(od_cuda_pool)        /* pool.c: max/avg/adaptive pools 2d/3d and their _backward */
OD_CUDA_KERNEL_(od_cuda_resample)    /* resample.c: upsample_nearest1d..3d, linear1d, bilinear2d, trilinear3d, backward */
OD_CUDA_KERNEL_(od_cuda_conv)        /* conv.c: convolution, convolution_backward (im2col + cuBLAS) */

OD_CUDA_KERNEL_(od_cuda_sdpa)        /* attention.c: _scaled_dot_product_attention_forward */
OD_CUDA_KERNEL_(od_cuda_embedding_bag) /* embedding_bag.c: _embedding_bag(_forward_only); its backward ops staged on the host */
OD_CUDA_KERNEL_(od_cuda_act_loss)    /* act_loss.c: binary_cross_entropy, glu, prelu and their _backward */
OD_CUDA_KERNEL_(od_cuda_fold)        /* fold.c: im2col, col2im, max_unpool2d/3d */
OD_CUDA_KERNEL_(od_cuda_dist)        /* dist.c: _cdist_forward, _cdist_backward, _pdist_forward, _pdist_backward */
#undef OD_CUDA_KERNEL_

/* ---- runtime.c ------------------------------------------------------------------- */

/* Where one operator's device work runs: the device, this thread's stream on
 * it (created on first use), and facts about the device. */
typedef struct od_cu_env {
    int device;
    cudaStream_t stream;
    int sm_count;
} od_cu_env;

/* Checks that CUDA is available and device exists (OD_EUNAVAIL with the
 * reason otherwise), makes it current and fills *env (caller's). */
od_status od_cu_begin(int device, od_cu_env *env, od_error *err);
/* Waits for env's stream; maps a device fault onto the error (what names the
 * operation). */
od_status od_cu_finish(const od_cu_env *env, const char *what, od_error *err);

/* OD_OK for cudaSuccess; otherwise clears the runtime's last error and fills
 * err. what: the failing call, e.g. "cudaMemcpyAsync in aten::copy_". */
od_status od_cu_status(cudaError_t e, const char *what, od_error *err);
od_status od_cu_blas_status(cublasStatus_t s, const char *what, od_error *err);

/* This thread's cuBLAS handle on env's device, bound to env's stream
 * (created on first use; owned by the thread, borrowed by the caller). */
od_status od_cu_blas_handle(const od_cu_env *env, cublasHandle_t *out, od_error *err);

/* Scratch device memory from the caching allocator (new; give it back with
 * od_cu_scratch_free with the same nbytes, after od_cu_finish). nbytes may
 * be 0 (returns NULL, OD_OK). */
od_status od_cu_scratch(const od_cu_env *env, size_t nbytes, void **out, od_error *err);
void od_cu_scratch_free(const od_cu_env *env, void *p, size_t nbytes);

/* This thread's error word pair (mapped pinned memory, device-visible;
 * borrowed), zeroed: flag[0] becomes non-zero when a kernel reports a
 * data-dependent error, flag[1] may carry the offending value. Read it
 * after od_cu_finish. */
od_status od_cu_flag(const od_cu_env *env, int64_t **flag, od_error *err);

/* This thread's two pinned staging buffers on env's device, each *chunk
 * bytes, with one event per buffer (recorded after the copy that uses it).
 * Owned by the thread; borrowed by the caller until it returns. */
od_status od_cu_staging(const od_cu_env *env, void *bufs[2], cudaEvent_t evs[2], size_t *chunk,
                        od_error *err);

/* Draws the (seed, offset) for a random call consuming n counters. */
void od_cu_rng_next(uint64_t n, uint64_t *seed, uint64_t *offset);

/* The allocator registered for OD_DEV_CUDA (static). */
const od_allocator *od_cu_allocator(void);

/* ---- util.c: tensors -> launcher arguments ---------------------------------------------- */

/* The CUDA device of a call: the device of the first CUDA tensor among the
 * stack's tensor arguments (lists included). Every other tensor must be on
 * that device, except 0-dim CPU tensors when allow_cpu_scalars (they are
 * read on the host as constants); otherwise OD_EMISMATCH in PyTorch's words,
 * naming the operator. Fails when no argument is a CUDA tensor. */
od_status od_cu_call_device(const od_op *op, const od_stack *s, bool allow_cpu_scalars, int *device,
                            od_error *err);

/* Runs built-in id on the host for a CUDA call (the staged kernels: LAPACK,
 * the nll losses): args[0..n) (the caller's, edited in place) have each
 * tensor replaced by a CPU copy, id runs on them through the dispatcher under
 * no_grad (the Autograd kernel above records the call's one node), and its
 * returns, copied to CUDA device `device`, become s's returns (new). */
od_status od_cu_on_host(od_opid id, od_value *args, int n, int device, od_stack *s, od_error *err);

/* Iterator over out (borrowed, on the device); inputs broadcast to out's shape. */
void od_cu_iter_init(od_cu_iter *it, const od_tensor *out);
/* Adds input t (borrowed): a strided view, or a constant when t is a 0-dim
 * CPU tensor. OD_EINTERNAL if t does not broadcast to the iterator's shape. */
od_status od_cu_iter_add_tensor(od_cu_iter *it, const od_tensor *t, od_error *err);
/* Adds a constant from a Scalar argument (bool/int/double, borrowed). */
void od_cu_iter_add_scalar(od_cu_iter *it, const od_value *v);
/* Drops size-1 dims and merges dims that are contiguous in every operand. */
void od_cu_iter_coalesce(od_cu_iter *it);

/* Runs one elementwise op into out over the prepared iterator and waits.
 * compute: od_dtype of the compute family. flag_what: when non-NULL, the op
 * may raise the integer-division flag, reported as OD_EINVAL
 * "ZeroDivisionError" in flag_what. */
od_status od_cu_run_elementwise(const od_cu_env *env, od_cu_iter *it, od_cu_ew op, od_dtype compute,
                                double alpha_d, int64_t alpha_i, const char *flag_what,
                                od_error *err);
/* The same with an OD_EWP operator's parameters (OD_CU_EW_MAX_PARAMS of
 * each; NULL for none). */
od_status od_cu_run_elementwise_p(const od_cu_env *env, od_cu_iter *it, od_cu_ew op, od_dtype compute,
                                  double alpha_d, int64_t alpha_i, const double *prm_d,
                                  const int64_t *prm_i, const char *flag_what, od_error *err);

/* dst[...] = src broadcast to dst's shape, converted to dst's dtype; both on
 * env's device (borrowed). Enqueues only (no sync). */
od_status od_cu_copy_same_device(const od_cu_env *env, od_tensor *dst, const od_tensor *src,
                                 od_error *err);

/* t (borrowed, on env's device) as a contiguous tensor: a new reference to t
 * when it already is, else a new contiguous copy (enqueued, not synced). */
od_status od_cu_contiguous(const od_cu_env *env, od_tensor *t, od_tensor **out, od_error *err);

/* ---- copy.c: host-side strided gather / scatter ------------------------------------------- */

/* A CPU tensor's elements in row-major order, its dims coalesced. */
typedef struct od_cu_host_walk {
    char *base;                   /* borrowed: the tensor's element [0, ..., 0] */
    size_t es;
    int ndim;
    int64_t sizes[OD_MAX_DIMS];   /* outermost first */
    int64_t bstrides[OD_MAX_DIMS];
} od_cu_host_walk;

/* t: borrowed CPU tensor; *w (caller's) borrows its memory. */
void od_cu_host_walk_init(od_cu_host_walk *w, const od_tensor *t);
/* Copies elements [begin, begin + count) of the walk's row-major order
 * between the tensor and buf (contiguous, caller's): to_buf gathers into
 * buf, else scatters from it. */
void od_cu_host_xfer(const od_cu_host_walk *w, int64_t begin, int64_t count, char *buf, bool to_buf);

/* Shape function of id + output allocation on device (outs new). */
od_status od_cu_outputs(od_opid id, const od_stack *s, int device, od_tensor **outs, int *nouts,
                        od_error *err);

/* Returns outs[0..n) on the stack (steals them). */
void od_cu_return(od_stack *s, od_tensor **outs, int n);

/* ---- factory.c: what every CUDA factory does around its kernel -------------------------------- */

/* Checks the factory's device d (OD_EINTERNAL unless CUDA: BackendSelect
 * routed it), begins device work (*env, caller's) and allocates its one
 * output by id's shape function (*out new). */
od_status od_cu_factory_begin(const od_op *op, od_opid id, od_device d, const od_stack *s, od_cu_env *env,
                              od_tensor **out, od_error *err);
/* Ends it: waits for env's stream when work was launched (an error there is
 * the call's unless st already is one); then returns out on the stack
 * (steals it), or releases it and returns st. */
od_status od_cu_factory_end(const od_op *op, const od_cu_env *env, od_status st, bool launched, od_tensor *out,
                            od_stack *s, od_error *err);
/* A factory written on the host: copies od_tensor_nbytes(out) bytes from
 * host (borrowed; free it after this returns: the copy has finished) into
 * out, then ends as od_cu_factory_end. */
od_status od_cu_factory_upload(const od_op *op, const od_cu_env *env, od_tensor *out, const void *host,
                               od_stack *s, od_error *err);

/* Operator's name for messages ("aten::add.Tensor"). */
const char *od_cu_op_name(const od_op *op);

#endif
