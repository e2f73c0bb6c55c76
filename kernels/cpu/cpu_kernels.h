/* cpu_kernels.h — private header of the CPU kernel family (kernels/cpu/).
 *
 * Invariants: every od_cpu_* name in the CPU column of kernels/ops.def is
 * declared here with the od_boxed_fn signature, so register.c can take their
 * addresses; ctx is (void *)(intptr_t)OD_OPID_<id> (see OD_OPID_OF_CTX). Each
 * kernel follows the boxed convention of od_value.h: s->args borrowed,
 * s->rets new on OD_OK, nrets == 0 on error. Only files of kernels/cpu/
 * (and their unit tests) include this header (docs/ARCHITECTURE.md: no kernel family reads another's private
 * header).
 */
#ifndef OD_CPU_KERNELS_H
#define OD_CPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "od_dispatch.h"
#include "od_ops.h"

/* A prefetch of the element `ahead` elements past p (p itself in bounds,
 * ahead >= 0), which may lie past the array's end: the prefetch never
 * faults, but a pointer beyond one-past-the-end is undefined in C, so the
 * address is formed as an integer. rw: 0 to read, 1 to write (a constant). */
#define OD_CPU_PREFETCH(p, ahead, rw) \
    __builtin_prefetch((const void *)((uintptr_t)(p) + (uintptr_t)(ahead) * sizeof *(p)), rw)

/* Outputs at least this large are written with streaming stores where a
 * kernel can (layer_norm, softmax rows): a plain store first reads the line
 * it fills (write-allocate), a third of the traffic of a pass that reads x
 * and writes y. Below about half the L3 the next reader of y would rather
 * find it in cache. */
#define OD_CPU_STREAM_BYTES ((int64_t)16 << 20)

/* The sum of eight partial sums (a borrowed) in a fixed pairwise order, so
 * every eight-accumulator reduction rounds the same way wherever it runs
 * (reduce.c's LANE_SUM_ loops, on gcc vector lanes, write the same order inline). */
static inline double od_cpu_sum8(const double *a)
{
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* How many of y[0..n) come before y's first 64-byte boundary: a streaming
 * writer stores those plainly, then whole aligned lines (y borrowed). */
static inline int64_t od_cpu_floats_before_line(const float *y, int64_t n)
{
    int64_t h = (int64_t)((64 - ((uintptr_t)y & 63)) & 63) / (int64_t)sizeof(float);
    return h < n ? h : n;
}

#define OD_CPU_KERNEL_(name) \
    od_status name(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err);

/* elementwise.c */
OD_CPU_KERNEL_(od_cpu_binary)  /* add sub mul div pow maximum minimum */
OD_CPU_KERNEL_(od_cpu_compare) /* eq ne lt le gt ge */
OD_CPU_KERNEL_(od_cpu_where)
OD_CPU_KERNEL_(od_cpu_pointwise) /* lerp addcmul addcdiv nextafter */
OD_CPU_KERNEL_(od_cpu_equal)     /* predicates.c */
OD_CPU_KERNEL_(od_cpu_isin)
OD_CPU_KERNEL_(od_cpu_unary)   /* neg abs relu gelu */
OD_CPU_KERNEL_(od_cpu_clamp)
OD_CPU_KERNEL_(od_cpu_ew)      /* every OD_EW1 / OD_EW2 operator of ops.def */
/* fill.c */
OD_CPU_KERNEL_(od_cpu_copy)    /* clone, copy_ */
OD_CPU_KERNEL_(od_cpu_fill)    /* fill_.Scalar */
OD_CPU_KERNEL_(od_cpu_arange)
OD_CPU_KERNEL_(od_cpu_random)  /* rand, randn */
/* factory.c */
OD_CPU_KERNEL_(od_cpu_linspace)    /* linspace, logspace */
OD_CPU_KERNEL_(od_cpu_tri_indices) /* tril_indices, triu_indices */
OD_CPU_KERNEL_(od_cpu_local_scalar) /* _local_scalar_dense */
/* reductions, normalisation, BLAS, joins (other files of kernels/cpu/) */
OD_CPU_KERNEL_(od_cpu_reduce)
OD_CPU_KERNEL_(od_cpu_softmax)
OD_CPU_KERNEL_(od_cpu_layer_norm)
OD_CPU_KERNEL_(od_cpu_blas)
OD_CPU_KERNEL_(od_cpu_cat)
OD_CPU_KERNEL_(od_cpu_index_select)
OD_CPU_KERNEL_(od_cpu_flip)         /* index.c */
OD_CPU_KERNEL_(od_cpu_scan)    /* scan.c: cumsum cumprod logcumsumexp cummax cummin */
OD_CPU_KERNEL_(od_cpu_sort)    /* sort.c: sort sort.stable topk kthvalue */
OD_CPU_KERNEL_(od_cpu_scatter)   /* scatter.c: gather, scatter.*, scatter_add, scatter_reduce.two */
OD_CPU_KERNEL_(od_cpu_masked_fill) /* masked.c: masked_fill.Scalar / .Tensor */
OD_CPU_KERNEL_(od_cpu_nonzero)     /* masked.c: allocates its data-dependent result */
OD_CPU_KERNEL_(od_cpu_take)        /* masked.c */
OD_CPU_KERNEL_(od_cpu_linalg)      /* linalg.c: the LAPACK operators (od_shape_linalg) */
OD_CPU_KERNEL_(od_cpu_search)      /* search.c: searchsorted, bucketize */
OD_CPU_KERNEL_(od_cpu_pad)         /* pad.c: reflection_pad1d..3d, replication_pad1d..3d */
OD_CPU_KERNEL_(od_cpu_repeat_interleave)  /* unique.c: repeat_interleave.Tensor */
OD_CPU_KERNEL_(od_cpu_unique_consecutive) /* unique.c */
OD_CPU_KERNEL_(od_cpu_norm)        /* norm.c: native_batch_norm, native_group_norm and their backward */
OD_CPU_KERNEL_(od_cpu_sdpa)               /* attention.c: _scaled_dot_product_attention_forward */
OD_CPU_KERNEL_(od_cpu_nll_loss)     /* loss.c: nll_loss_forward, nll_loss2d_forward and their _backward */
OD_CPU_KERNEL_(od_cpu_pool)        /* pool.c: max/avg/adaptive pools 2d/3d and their _backward */
OD_CPU_KERNEL_(od_cpu_resample)    /* resample.c: upsample_nearest1d..3d, linear1d, bilinear2d, trilinear3d, backward */
OD_CPU_KERNEL_(od_cpu_conv)        /* conv.c: convolution, convolution_backward */
OD_CPU_KERNEL_(od_cpu_embedding_bag) /* embedding_bag.c: _embedding_bag(_forward_only), _dense_backward, _per_sample_weights_backward */
OD_CPU_KERNEL_(od_cpu_act_loss)    /* act_loss.c: binary_cross_entropy, glu, prelu and their _backward */
OD_CPU_KERNEL_(od_cpu_fold)        /* fold.c: im2col, col2im, max_unpool2d/3d */
OD_CPU_KERNEL_(od_cpu_dist)        /* dist.c: _cdist_forward, _cdist_backward, _pdist_forward, _pdist_backward */

#undef OD_CPU_KERNEL_

/* ---- helpers shared by the CPU kernels (fill.c) ---- */

/* Seeds the calling thread's generator (xoshiro256**) for rand/randn, so
 * tests are reproducible. Other threads keep their own /dev/urandom seeds. */
void od_cpu_manual_seed(uint64_t seed);

/* Copies src into dst elementwise with broadcasting of src to dst's shape and
 * dtype conversion (torch's copy_ semantics, minus the device copy). Both
 * borrowed, both CPU. Safe when src and dst overlap in memory. */
od_status od_cpu_copy_into(od_tensor *dst, const od_tensor *src, od_error *err);

/* A kernel's last step with one result: on an error st, out (new, may be
 * NULL) is released and st returned; else out becomes s->rets[0] (stolen). */
static inline od_status od_cpu_return1(od_stack *s, od_tensor *out, od_status st)
{
    if (st) {
        od_tensor_release(out);
        return st;
    }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}

/* src (borrowed, CPU) as a contiguous tensor of dtype dt: a new reference to
 * src itself when it already is one, else a new converted copy. *out new. */
od_status od_cpu_to_dtype(od_tensor *src, od_dtype dt, od_tensor **out, od_error *err);

/* Where a kernel computing in dtype cdt writes the result for `out`
 * (borrowed, contiguous): *tgt = a new reference to out itself when the
 * dtypes agree, else a new contiguous temporary of dtype cdt. */
od_status od_cpu_compute_target(od_tensor *out, od_dtype cdt, od_tensor **tgt, od_error *err);
/* Copies tgt into out when they differ, then releases tgt (steals it, on
 * success and on error). */
od_status od_cpu_finish_target(od_tensor *out, od_tensor *tgt, od_error *err);

/* Call before any BLAS or LAPACK call (blas.c): sizes OpenBLAS's thread pool
 * once, and keeps its workers off the caller's CPU when the call's work
 * (multiply-adds; INFINITY when unknown) is large enough to use them. */
void od_cpu_blas_enter(double work);

/* Writes scalar v (bool/int/double od_value, borrowed) converted to dt into
 * buf (at least 8 bytes), wrapping integers and rounding floats like a torch
 * cast. */
void od_cpu_scalar_to_dtype(const od_value *v, od_dtype dt, void *buf);

/* layer_norm.c: ATen's RowwiseMoments of n values at x (borrowed; double for
 * F64, float for the others, bfloat16 data read as float), the mean and the
 * biased variance, rounded as torch 1.13 rounds them: BF16 as layer norm's
 * float accumulation, BF16_ARITH as group norm's c10::BFloat16 arithmetic. */
enum { OD_ROW_MOMENTS_F64, OD_ROW_MOMENTS_F32, OD_ROW_MOMENTS_BF16, OD_ROW_MOMENTS_BF16_ARITH };
void od_cpu_row_moments(int kind, const void *x, int64_t n, double *mean, double *var);

/* ---- contiguous row sums shared by the reductions and normalisations
 * (reduce.c). x: borrowed, n >= 0. Accumulate in double with independent
 * lanes (vectorised); float64 is pairwise above 1024 elements. ---- */
double od_cpu_sum_f32(const float *x, int64_t n);
double od_cpu_sum_f64(const double *x, int64_t n);
/* Sum of (x[i] - mean)^2, accumulated the same way. */
double od_cpu_sqdev_f32(const float *x, int64_t n, double mean);
double od_cpu_sqdev_f64(const double *x, int64_t n, double mean);

/* Hot loops get AVX2 and AVX-512 clones picked at run time (the build
 * targets x86-64-v2 so the binaries run anywhere). Off under ASan, whose
 * instrumentation does not mix with ifunc resolution early at start-up. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(OD_CPU_NO_CLONES)
#ifdef OD_CPU_NO_AVX512
#define OD_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define OD_CPU_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define OD_CPU_V4_CLONES 1
#endif
#else
#define OD_CPU_CLONES
#endif
#ifndef OD_CPU_V4_CLONES
#define OD_CPU_V4_CLONES 0
#endif

/* gelu's erf form on the host (elementwise.c's ew_gelu_erf_f32 and its
 * vector form in vmath512.c): the degree-4 polynomial of its cut exp, and
 * Phi(-t) / e^(-t^2/2) = (N0 + ... + N4 t^4) / (1 + D1 t + ... + D5 t^5). */
#define OD_CPU_GELU_ERF_E4 1.3814592966809869e-3f
#define OD_CPU_GELU_ERF_E3 8.3687175065279e-3f
#define OD_CPU_GELU_ERF_E2 4.166838899254799e-2f
#define OD_CPU_GELU_ERF_E1 1.666652113199234e-1f
#define OD_CPU_GELU_ERF_E0 4.999999403953552e-1f
#define OD_CPU_GELU_ERF_N4 4.108871333e-03f
#define OD_CPU_GELU_ERF_N3 4.058317095e-02f
#define OD_CPU_GELU_ERF_N2 1.830867380e-01f
#define OD_CPU_GELU_ERF_N1 4.380947351e-01f
#define OD_CPU_GELU_ERF_N0 0.5f
#define OD_CPU_GELU_ERF_D5 1.029929146e-02f
#define OD_CPU_GELU_ERF_D4 1.017334461e-01f
#define OD_CPU_GELU_ERF_D3 4.690788388e-01f
#define OD_CPU_GELU_ERF_D2 1.201886892e+00f
#define OD_CPU_GELU_ERF_D1 1.674074411e+00f

/* vmath512.c: y[i] = f(x[i]) for i < n, contiguous float32, on AVX-512
 * with the bits of elementwise.c's x86-64-v4 clone of f (od_math_<fn>_f32;
 * gelu_erf: gelu on oneDNN's path), but for both gelu forms where |x| < 4:
 * a table of polynomials there, within 2.4 and 2.6 ulp of double (a value
 * still depends on its own x only); stream: y's whole 64-byte lines with
 * streaming stores (a part of an output of OD_CPU_STREAM_BYTES or more).
 * y, x borrowed: the same array or not overlapping. False, with nothing
 * written, without those clones or such a CPU, or when turned off. */
bool od_cpu_vm512_exp(float *y, const float *x, int64_t n, bool stream);
bool od_cpu_vm512_sigmoid(float *y, const float *x, int64_t n, bool stream);
bool od_cpu_vm512_silu(float *y, const float *x, int64_t n, bool stream);
bool od_cpu_vm512_tanh(float *y, const float *x, int64_t n, bool stream);
bool od_cpu_vm512_gelu_erf(float *y, const float *x, int64_t n, bool stream);
bool od_cpu_vm512_gelu_tanh(float *y, const float *x, int64_t n, bool stream);
/* y[i] = gcd(a[i], b[i]), or lcm, for i < n, contiguous int32 (ATen's
 * int32 gcd and lcm, od_math_gcd_bits_i64 and _lcm_ at 32 bits), on
 * AVX-512. y, a, b borrowed; y may be a or b, else none overlap. False,
 * with nothing written, as above. */
bool od_cpu_vm512_gcd_i32(int32_t *y, const int32_t *a, const int32_t *b, int64_t n);
bool od_cpu_vm512_lcm_i32(int32_t *y, const int32_t *a, const int32_t *b, int64_t n);
/* Turns those loops on (the default) or off, for every thread, so tests
 * and benchmarks can run elementwise.c's own loops; true when they now
 * run. */
bool od_cpu_vm512_enable(bool on);

/* transpose.c: dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols,
 * elements of 4 bytes (32) or 8 bytes (64) moved bit for bit; src and dst
 * borrowed, not overlapping; nothing else of dst written. Serial. */
void od_cpu_transpose32(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t rows, int64_t cols);
void od_cpu_transpose64(const void *src, int64_t lds, void *dst, int64_t ldd, int64_t rows, int64_t cols);
/* Whether they use AVX-512 from now on (on: where the CPU has it; off: the
 * element loop, for tests); true when AVX-512 now runs. */
bool od_cpu_transpose_avx512(bool on);

/* conv_direct.c: y [N, C_grid, grid] = bias + the convolution of x
 * [N, C_img, img] with w [C_grid, C_img / groups, k], all contiguous
 * float32 (borrowed; y is written whole), computed directly on AVX-512 or
 * AVX2. False, with nothing written, where it does not apply (a transposed
 * plan, no such CPU, few output channels per group, no memory): the caller
 * then runs its im2col path. */
struct od_conv_plan; /* od_shape.h */
bool od_cpu_conv_direct_f32(const struct od_conv_plan *p, const float *x, const float *w, const float *bias, float *y);
/* The same for a depthwise plan (groups == C_img == C_grid): y = bias +
 * each channel's own filter over its plane, on AVX-512. False, with nothing
 * written, where it does not apply (no AVX-512 or direct kernel off, not
 * depthwise, over 32 taps or a stride over 16 along the row, no memory). */
bool od_cpu_conv_depthwise_f32(const struct od_conv_plan *p, const float *x, const float *w, const float *bias,
                               float *y);
/* The instruction set od_cpu_conv_direct_f32 uses from now on: "avx512",
 * "avx2", "off", or NULL for the best the CPU has (the default, unless the
 * OD_CONV_DIRECT environment variable names one). name: borrowed. False,
 * with nothing changed, when the CPU lacks the named set. */
bool od_cpu_conv_direct_use(const char *name);
/* c [m, n] (row stride ldc) += a [m, k] @ b [n, k]^T, float32 on AVX-512 in
 * the pool (conv.c's weight gradient). a, b borrowed. False, with nothing
 * written, where the direct kernel's instruction set is not AVX-512 or
 * there is no memory: the caller then runs its GEMM. */
bool od_cpu_conv_gemm_nt_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                             float *c, int64_t ldc);

/* conv.c's column loops of one sample, for im2col / col2im (fold.c): c image
 * channels, 3 spatial dims (leading 1s for 2d), as od_fold_plan's geometry.
 * im2col writes col [c * kvol, L] from im [c, img] (both borrowed,
 * contiguous); col2im adds col's entries into im (zeroed by the caller),
 * each pixel's in ATen's order (kernel taps, then blocks). */
typedef struct od_cpu_cols {
    int64_t c, img[3], grid[3], k[3], s[3], p[3], d[3];
} od_cpu_cols;
void od_cpu_im2col(const od_cpu_cols *cols, bool f64, const void *im, void *col);
void od_cpu_col2im(const od_cpu_cols *cols, bool f64, const void *col, void *im);

#endif
