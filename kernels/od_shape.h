/* od_shape.h — shape and dtype functions of the built-in operators.
 *
 * Invariants: a shape function reads the boxed arguments (borrowed) and
 * writes one od_out_spec per return without touching tensor data or
 * allocating tensors; it validates every argument (shapes, dims, dtypes) and
 * returns OD_EMISMATCH / OD_EINVAL / OD_EUNSUPPORTED with a message naming the
 * operator's argument. It is the single source of truth for output shapes:
 * the Meta kernel is a shape function plus meta allocation, and the CPU and
 * CUDA kernels call the same function before allocating their outputs.
 * These functions belong to no key family, so every family may include this.
 */
#ifndef OD_SHAPE_H
#define OD_SHAPE_H

#include "od_ops.h"
#include "od_ew.h"

typedef struct od_out_spec {
    od_dtype dtype;
    od_device device;
    int ndim;
    int64_t sizes[OD_MAX_DIMS];
    int alias_of; /* >= 0: this return IS argument alias_of (in-place ops) */
    bool strided; /* strides below, not contiguous (a clone that keeps a layout) */
    int64_t strides[OD_MAX_DIMS];
} od_out_spec;

typedef od_status (*od_shape_fn)(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts,
                                 od_error *err);

/* Allocates the outputs described by specs (alias_of returns retain that
 * argument). outs[i] are new references; on error none are left allocated. */
od_status od_alloc_outputs(const od_stack *s, const od_out_spec *specs, int n, od_tensor **outs,
                           od_error *err);
/* The same for a kernel that writes every element of every new output: no
 * clearing (see od_tensor_empty_uninit, and its poison mode in the tests). */
od_status od_alloc_outputs_overwrite(const od_stack *s, const od_out_spec *specs, int n,
                                     od_tensor **outs, od_error *err);

/* An int list argument's items (borrowed from v, or *one for a bare int,
 * which reads as a list of one) and its length; -1 when v is neither. */
int od_shape_int_list(const od_value *v, const int64_t **items, int64_t *one);
/* Argument i of s as a Tensor (*out borrowed from the stack), or torch's
 * "<op>(): argument '<name>' must be a Tensor"; optional (Tensor?): None
 * gives NULL. */
od_status od_shape_arg_tensor(const od_stack *s, int i, const char *op, const char *name, const od_tensor **out,
                              bool optional, od_error *err);
/* *o as a fresh output (no alias, default layout) of dtype dt on dev, with
 * sizes[0..ndim) copied (borrowed). */
void od_out_spec_init(od_out_spec *o, od_dtype dt, od_device dev, const int64_t *sizes, int ndim);
/* Argument i of s as an int, or torch's "... must be an int". */
od_status od_shape_arg_int(const od_stack *s, int i, const char *op, const char *name, int64_t *out, od_error *err);

/* Lays o (sizes and ndim set) out as mf asks, empty_like's rule: strides of
 * channels_last(_3d), or like's layout kept under preserve_format when like
 * (borrowed, may be NULL) is dense; o->strided stays false for contiguous. */
od_status od_out_spec_layout(od_out_spec *o, const od_tensor *like, od_memory_format mf, od_error *err);

/* TensorIterator's rule for an output it does not resize (an in-place self,
 * copy_'s destination): every input in[0..nin) broadcasts with out, output
 * as tensor a, and the broadcast is out's shape. Sizes borrowed. */
od_status od_broadcast_into(const int64_t *out, int nout, const int64_t *in, int nin, od_error *err);

/* TensorIterator's shape over its inputs: ts[0..n) broadcast in order (an
 * error names the shape so far as tensor a) into sizes (OD_MAX_DIMS) / *nd;
 * n == 0 gives *nd = -1. Tensors borrowed. */
od_status od_broadcast_tensors(const od_tensor *const *ts, int n, int64_t *sizes, int *nd, od_error *err);

/* The words of refusals ATen makes after its TensorIterator build (the CPU
 * loop's integer division by zero, add and sub's alpha checks, a Scalar
 * argument's conversion in the kernel, gelu's approximate): an in-place
 * operator's build checks (self's shape, the cast to self's dtype) come
 * before them (composite/inplace.c). */
#define OD_MSG_ZERO_DIVISION "ZeroDivisionError"
#define OD_MSG_ALPHA_BOOL "Boolean alpha only supported for Boolean results."
#define OD_MSG_ALPHA_FLOAT "For integral input tensors, argument alpha must not be a floating point number."
#define OD_MSG_SCALAR_OVERFLOW "value cannot be converted to type " /* a Scalar's conversion, its prefix */
#define OD_MSG_GELU_APPROXIMATE "approximate argument must be either none or tanh."

/* The shape function of a built-in, or NULL. */
od_shape_fn od_builtin_shape_fn(od_opid id);

#define OD_SHAPE_FNS(X) \
    X(od_shape_binary) X(od_shape_compare) X(od_shape_where) X(od_shape_unary) \
    X(od_shape_clamp) X(od_shape_reduce) X(od_shape_softmax) X(od_shape_layer_norm) \
    X(od_shape_matmul) X(od_shape_cat) X(od_shape_same) X(od_shape_inplace) \
    X(od_shape_index_select) X(od_shape_factory) X(od_shape_arange) X(od_shape_ew) \
    X(od_shape_scan) \
    X(od_shape_scatter) X(od_shape_masked_fill) X(od_shape_take) X(od_shape_nonzero) \
    X(od_shape_pointwise) X(od_shape_isin) X(od_shape_equal) X(od_shape_linalg) X(od_shape_search) \
    X(od_shape_pad) X(od_shape_data_sized) \
    X(od_shape_norm) X(od_shape_sdpa) X(od_shape_nll_loss) X(od_shape_pool) X(od_shape_resample) \
    X(od_shape_conv) \
    X(od_shape_embedding_bag) \
    X(od_shape_act_loss) \
    X(od_shape_fold) X(od_shape_dist) X(od_shape_flip)

#define OD_X_(fn) od_status fn(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, \
                                od_error *err);
OD_SHAPE_FNS(OD_X_)
#undef OD_X_

/* ---- helpers shared by shape functions and kernels ---- */

/* mark[d] (OD_MAX_DIMS entries, cleared first) for each dim of dims[0..n)
 * wrapped against self; torch's "dim %d appears multiple times in the list
 * of dims" for a repeat (flip's, ATen's dim_list_to_bitset). */
od_status od_mark_unique_dims(const od_tensor *self, const int64_t *dims, int64_t n, bool *mark, od_error *err);

/* Reduction dims: from an int[1]? / int[1] / int? argument (None or [] = all
 * dims) into a bitmask over ndim dims; errors name the argument "dim".
 * wrap_first: every dim is wrapped before a repeated one is refused, as the
 * structured reductions' resize_reduction does (sum, mean, amax, norm);
 * else dim by dim, as make_dim_mask (std, var, nansum). */
od_status od_reduce_dims(const od_value *dim_arg, int ndim, bool wrap_first, uint32_t *mask, od_error *err);

/* mm / bmm of a (borrowed) by b with nothing to multiply: an empty result or
 * an empty sum. ATen returns zeros before it looks at the dtypes, so such a
 * product takes any dtypes, bool included (mm's result has self's dtype,
 * bmm's mat2's). */
static inline bool od_mm_is_trivial(const od_tensor *a, const od_tensor *b)
{
    return od_tensor_numel(a) == 0 || b->sizes[b->ndim - 1] == 0;
}

/* clamp (Scalar bounds) with both bounds given and one of them NaN: ATen 1.13
 * fills the output with NaN; a NaN bound alone leaves the input instead. */
bool od_clamp_fills_nan(od_opid id, const od_stack *s);

/* caffe2::TypeMeta's name of dt ("float", "long int", "c10::Half"), as torch
 * prints tensor.dtype() inside C++ messages (a static string). */
const char *od_dtype_meta_name(od_dtype dt);

/* Dtype a Scalar argument contributes to result_type (bool/int/float). */
od_result_arg od_result_arg_of_value(const od_value *v);

/* ---- reductions: the parsed arguments of sum ... var.correction, shared by
 * od_shape_reduce and every backend's reduction kernel ---- */
typedef enum od_reduce_kind {
    OD_RED_SUM,
    OD_RED_MEAN,
    OD_RED_AMAX,
    OD_RED_AMIN,
    OD_RED_ARGMAX,
    OD_RED_VAR,
    OD_RED_ARGMIN,
    OD_RED_PROD
} od_reduce_kind;

typedef struct od_reduce_info {
    od_reduce_kind kind;
    uint32_t mask;       /* bit d set: dim d of self is reduced */
    bool keepdim;
    od_dtype out_dtype;  /* the result's dtype; sum/mean cast self to it first */
    int64_t correction;  /* var: the divisor is max(0, N - correction) */
} od_reduce_info;

/* Validates the arguments of reduction built-in id (s: borrowed) like torch
 * (dtype rules, empty reductions, duplicate dims) and describes it in *info. */
od_status od_reduce_parse(od_opid id, const od_stack *s, od_reduce_info *info, od_error *err);

/* torch.cat's legacy rule: a 1-D tensor of size 0 takes no part in the shape
 * checks and contributes nothing (t: borrowed). */
static inline bool od_cat_should_skip(const od_tensor *t)
{
    return t->ndim == 1 && t->sizes[0] == 0;
}

/* ---- elementwise helpers (kernels/shape_elementwise.c), shared by the CPU,
 * CUDA and Meta kernels so they agree on every rule ---- */

/* The dtype every input is converted to before the per-element math: the
 * output dtype, except for comparisons and the LOGICAL rule (torch's common
 * dtype of the operands; the output is bool). Validates the call like the
 * shape function.
 * s: borrowed. */
od_status od_elementwise_common_dtype(od_opid id, const od_stack *s, od_dtype *out, od_error *err);

/* The dtype rule of a per-element operator of ops.def (OD_EW1/OD_EW2 lines),
 * OD_EWR_NONE for every other operator. */
od_ew_rule od_ew_rule_of(od_opid id);
/* Its inputs (1 or 2), 0 for every other operator (OD_EWP ones included:
 * see od_ew_self_arg). */
int od_ew_arity(od_opid id);
/* The argument index of the one tensor input of an OD_EWP operator (the
 * others are its parameters), -1 for every other operator. */
int od_ew_self_arg(od_opid id);

/* The parameters of an OD_EWP operator as its ATen kernel holds them for the
 * compute dtype dt (to<scalar_t>() with c10's overflow check, dtype-dependent
 * defaults), in each compute family: d (float, double) and i (int64). The
 * call must have passed od_shape_ew. s: borrowed. */
typedef struct od_ew_params {
    double d[OD_EW_MAX_PARAMS];
    int64_t i[OD_EW_MAX_PARAMS];
} od_ew_params;
od_status od_ew_params_of(od_opid id, const od_stack *s, od_dtype dt, od_ew_params *p, od_error *err);

/* searchsorted / bucketize (shape_search.c): the checked arguments, borrowed
 * from the stack. The input is a tensor, or (the .Scalar overloads) scalar;
 * both sides compare in common; each input element's boundary row is row
 * (i / inner) of boundaries' rows of len (row 0 when boundaries is 1-D). */
typedef struct od_search_plan {
    const od_tensor *boundaries, *input, *sorter; /* input, sorter: NULL when absent */
    od_value scalar;
    od_dtype common;
    bool out_int32, right;
    int64_t len, inner, n;
} od_search_plan;
od_status od_search_plan_of(od_opid id, const od_stack *s, od_search_plan *p, od_error *err);

/* isin (shape_elementwise.c): ATen 1.13's isin_Tensor_Tensor_out choices,
 * shared by the CPU and CUDA kernels after od_shape_isin's checks: n
 * elements, m test elements (a Scalar counts 1), both compared in common;
 * replay: the sorting path with assume_unique (each element answered by its
 * stable-sorted neighbour), else plain membership. cpu: the backend is the
 * CPU, whose brute-force kernel has no float16 loop ("isin_default_cpu"). */
typedef struct od_isin_plan {
    int64_t n, m;
    od_dtype common;
    bool replay, invert;
} od_isin_plan;
od_status od_isin_plan_of(od_opid id, const od_stack *s, bool cpu, od_isin_plan *p, od_error *err);

/* reflection_pad1d/2d/3d, replication_pad1d/2d/3d (shape_pad.c): self
 * (borrowed) has lead leading dims copied as they are and nd padded ones;
 * for padded dim k (first spatial dim first) in[k] -> out[k] = in + pad_l +
 * pad_r (negative pads crop). */
typedef struct od_pad_plan {
    const od_tensor *self;
    int nd, lead;
    bool reflect;
    int64_t in[3], out[3], pad_l[3], pad_r[3];
} od_pad_plan;
od_status od_pad_plan_of(od_opid id, const od_stack *s, od_pad_plan *p, od_error *err);
/* The input index output index j of a padded dim reads (ATen's loops). */
int64_t od_pad_source_index(bool reflect, int64_t j, int64_t in, int64_t pad_l);

/* convolution / convolution_backward (shape_conv.c): the checked arguments,
 * tensors borrowed from the stack (bias NULL when absent, and always for
 * convolution_backward). Geometry in 3 spatial dims, the first 3 - nd of
 * them trivial. The image side is the one the kernel window slides over
 * (input of a convolution, output of a transposed one), with C_img
 * channels and img[] sizes; the grid side has one position per window
 * (grid[] = the output of a convolution, the input of a transposed one),
 * with C_grid channels. The weight is [C_grid, C_img / groups, k...].
 * mask: convolution_backward's output_mask. */
typedef struct od_conv_plan {
    const od_tensor *input, *weight, *bias;
    int nd;
    bool transposed, mask[3];
    int64_t groups, N, C_img, C_grid;
    int64_t img[3], grid[3], k[3], stride[3], pad[3], dil[3], opad[3];
} od_conv_plan;
od_status od_conv_plan_of(od_opid id, const od_stack *s, od_conv_plan *p, od_error *err);

/* repeat_interleave.Tensor / unique_consecutive (shape_unique.c): their
 * argument checks (pointers borrowed from the stack). unique's *dim is the
 * wrapped dim, or -1 for None. od_shape_data_sized runs them and refuses:
 * the results' sizes depend on the data. */
od_status od_repeat_interleave_check(const od_stack *s, const od_tensor **repeats, bool *has_size, int64_t *size,
                                     od_error *err);
od_status od_unique_consecutive_check(const od_stack *s, const od_tensor **self, bool *inverse, bool *counts,
                                      int *dim, od_error *err);

/* The alpha an add or sub kernel multiplies other by, as torch computes it:
 * sub is add with alpha negated (an int alpha wraps: -(-2^63) is -2^63),
 * and a bool result takes alpha as a bool (true + (-1)*true is true).
 * alpha: borrowed, a number. */
od_value od_add_alpha(od_opid id, const od_value *alpha, od_dtype dt);

/* div's rounding_mode as OD_DIV_* (OD_DIV_TRUE for the overloads without
 * one); OD_EINVAL with torch's message for any other string. s: borrowed. */
enum { OD_DIV_TRUE = 0, OD_DIV_TRUNC = 1, OD_DIV_FLOOR = 2 };
od_status od_div_rounding_mode(od_opid id, const od_stack *s, int *mode, od_error *err);

/* gelu's approximate argument (s->args[1], borrowed): "none" or "tanh",
 * else OD_EINVAL. */
od_status od_gelu_approximate(const od_stack *s, bool *tanh_form, od_error *err);

/* c10's checked_convert: OD_EINVAL "value cannot be converted to type int8_t
 * without overflow" when the Scalar v (borrowed) does not fit dt. */
od_status od_scalar_check_fits(const od_value *v, od_dtype dt, od_error *err);

/* A TensorIterator's safe-cast check of its common dtype into an output's:
 * OD_EINVAL "result type Float can't be cast to the desired output type
 * Long" unless od_dtype_can_cast(result, out). */
od_status od_check_result_cast(od_dtype result, od_dtype out, od_error *err);

/* arange's validated arguments: values are istart + i * istep (computed in
 * int64 with wraparound, then cast) when integral, else fstart + i * fstep
 * computed in double and rounded to dtype. */
typedef struct od_arange_params {
    od_dtype dtype;
    od_device device;
    int64_t size;
    bool integral;
    int64_t istart, istep;
    double fstart, fstep;
} od_arange_params;
/* Reads and validates arange's arguments (s borrowed) into *p (caller's). */
od_status od_arange_params_of(od_opid id, const od_stack *s, od_arange_params *p, od_error *err);

/* ---- factories of kernels/shape_factory.c (eye, linspace, logspace,
 * tril_indices, triu_indices) and _local_scalar_dense ---- */
od_status od_shape_eye(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err);
od_status od_shape_linspace(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err);
od_status od_shape_tri_indices(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err);
od_status od_shape_local_scalar(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err);

/* The factory keyword options at s->args[k..k+3] (dtype, layout, device,
 * pin_memory; s borrowed) with the factories' checks: *has_dt says whether a
 * dtype was given, *dev is cpu when None. */
od_status od_factory_options(od_opid id, const od_stack *s, int k, bool *has_dt, od_dtype *dt,
                             od_device *dev, od_error *err);

/* linspace / logspace's validated arguments: start and end as given
 * (Scalars, converted by each backend as ATen's kernel does: to<scalar_t>,
 * range-checked here), steps >= 0, logspace's base. */
typedef struct od_linspace_params {
    od_dtype dtype;
    od_device device;
    int64_t steps;
    bool log;
    double base;
    double start, end; /* start.to<scalar_t>(), end.to<scalar_t>() as doubles */
} od_linspace_params;
od_status od_linspace_params_of(od_opid id, const od_stack *s, od_linspace_params *p, od_error *err);

/* tril_indices / triu_indices: the result is [2, count] of dtype (int32 or
 * int64); the first count entries are rows, the next count columns. */
typedef struct od_tri_indices_params {
    od_dtype dtype;
    od_device device;
    bool upper;
    int64_t row, col, offset, count;
} od_tri_indices_params;
od_status od_tri_indices_params_of(od_opid id, const od_stack *s, od_tri_indices_params *p, od_error *err);
/* Fills data (caller's, 2 * count elements of p->dtype): the rows, then the
 * columns, in ATen's row-major order. */
void od_tri_indices_fill(const od_tri_indices_params *p, void *data);

/* ---- scans and sorting (kernels/shape_scan.c): the parsed arguments of
 * cumsum ... kthvalue, shared by od_shape_scan and every backend ---- */
typedef struct od_scan_info {
    int dim;             /* wrapped; 0 for a 0-dim self */
    int64_t outer, size, inner; /* self viewed as [outer, size, inner] (size 1 when 0-dim) */
    od_dtype out_dtype;  /* cumsum/cumprod: the result's dtype (self is cast to it first) */
    bool descending;     /* sort: descending; topk: largest */
    bool stable;         /* sort.stable */
    bool sorted;         /* topk */
    bool keepdim;        /* kthvalue, median.dim, nanmedian.dim, mode */
    int64_t k;           /* topk, kthvalue */
} od_scan_info;

/* Validates the arguments of scan/sort built-in id (s: borrowed) with
 * PyTorch's messages and describes the call in *info (caller's). */
od_status od_scan_parse(od_opid id, const od_stack *s, od_scan_info *info, od_error *err);
/* ATen's CPU dtype refusal for this call (every backend applies it):
 * OD_EUNSUPPORTED "\"cumsum_out_cpu\" not implemented for 'Bool'", or OD_OK. */
od_status od_scan_check_dtype(od_opid id, const od_stack *s, const od_scan_info *info, od_error *err);
/* A 0-dim cumsum/cumprod is ATen's result.fill_(self): self's value (elem:
 * its one element of dtype self_dt, in host memory, borrowed) as a Scalar
 * must fit the result dtype, else OD_EINVAL "value cannot be converted to
 * type uint8_t without overflow". */
od_status od_scan_check_fill(od_dtype self_dt, const void *elem, od_dtype out_dt, od_error *err);
/* The OD_SORT_OP_* (kernels/od_sort_algo.h) of sort-family or selection
 * built-in id (sort, sort.stable by info->stable, topk, kthvalue, median,
 * nanmedian and their .dim, mode), for every backend's kernel. */
int od_sort_op_of(od_opid id, const od_scan_info *info);
/* ---- gather / scatter (kernels/shape_index.c), shared by od_shape_scatter
 * and every backend's kernel ---- */
typedef enum od_scatter_reduce {
    OD_SCR_NONE, /* plain assignment (scatter.src / scatter.value) */
    OD_SCR_SUM,  /* scatter_add, reduce="add" / "sum" */
    OD_SCR_PROD, /* reduce="multiply" / "prod" */
    OD_SCR_MEAN,
    OD_SCR_AMAX,
    OD_SCR_AMIN
} od_scatter_reduce;

typedef struct od_scatter_info {
    bool gather;               /* gather: out has index's shape */
    int dim;                   /* wrapped against self (0 for a 0-dim self) */
    od_tensor *self, *index;   /* borrowed from the stack */
    od_tensor *src;            /* borrowed; NULL for the Scalar overloads */
    od_value value;            /* the Scalar of scatter.value(_reduce) */
    od_scatter_reduce reduce;
    bool include_self;         /* scatter_reduce.two; true otherwise */
} od_scatter_info;

/* Validates gather / scatter.* / scatter_add / scatter_reduce.two (s
 * borrowed) with PyTorch 1.13's checks and messages, and describes the call.
 * Index values are not read here. */
od_status od_scatter_parse(od_opid id, const od_stack *s, od_scatter_info *info, od_error *err);
/* OD_EINVAL "index V is out of bounds for dimension D with size N" unless
 * 0 <= value < self's size in info->dim. */
od_status od_scatter_check_index(const od_scatter_info *info, int64_t value, od_error *err);

/* take's index value v against numel elements: OD_EINVAL "out of range:
 * tried to access index V on a tensor of N elements." outside [-N, N),
 * else *wrapped = v mod N. */
od_status od_take_check_index(int64_t v, int64_t numel, int64_t *wrapped, od_error *err);


/* ---- LAPACK operators (kernels/shape_linalg.c): the parsed arguments
 * shared by od_shape_linalg and every backend's kernel ---- */
typedef struct od_linalg_info {
    int nbatch;                  /* batch dims of the result (broadcast for the solvers) */
    int64_t batch[OD_MAX_DIMS];
    int64_t nbatches;            /* their product */
    int64_t m, n;                /* A's rows, cols; solvers: m, k are B_'s rows, cols, n A's order */
    int64_t k;
    bool check_errors, upper, left, unitriangular, vector_case, full, compute, pivot;
    int mode;                    /* linalg_qr: 0 reduced, 1 complete, 2 r */
    /* linalg_lstsq: m, n are A's rows, cols, k the right-hand sides (1 in
     * the vector case); batch is A's broadcast with B's */
    int driver;                  /* OD_LSTSQ_* */
    double rcond;                /* torch's default resolved: eps(dtype) * max(m, n) */
} od_linalg_info;

enum { OD_LSTSQ_GELS, OD_LSTSQ_GELSY, OD_LSTSQ_GELSD, OD_LSTSQ_GELSS };

/* Validates the arguments of LAPACK operator id (s: borrowed) as torch 1.13's
 * meta function does, with its messages, and describes the call in *li. */
od_status od_linalg_parse(od_opid id, const od_stack *s, od_linalg_info *li, od_error *err);
/* The refusal of ATen's CPU kernel dispatch for a dtype other than float32 /
 * float64 ("lu_cpu" not implemented for 'Half'). */
od_status od_linalg_check_dtype(od_opid id, const od_stack *s, od_error *err);
/* torch 1.13's _linalg_check_errors: the error for the first nonzero of
 * info[0..n) (borrowed) under api's name ("linalg.inv"), naming the batch
 * element when batched; OD_OK when all are zero. */
/* linalg_lstsq's four outputs as torch 1.13 returns them for li's driver
 * (s: borrowed, parsed into li): the solution (batch, n[, k]); residuals
 * (batch, k) where `residuals`, else empty; rank (int64, A's own batch)
 * but for gels; singular values (A's batch, min(m, n)) for gelsd/gelss. */
void od_linalg_lstsq_specs(const od_stack *s, const od_linalg_info *li, bool residuals, od_out_spec *outs);
od_status od_linalg_info_error(const char *api, const int32_t *info, int64_t n, bool batched, od_error *err);

/* native_batch_norm(_backward) and native_group_norm(_backward) (shape_reduce.c):
 * the checked arguments their CPU and CUDA kernels share. The input is viewed as
 * [N, C, S] (S: the product of the dims after the channel; group norm's HxW).
 * Tensors are borrowed from the stack; absent optional ones are NULL. */
typedef struct od_norm_plan {
    bool group;                 /* native_group_norm(_backward), else batch norm */
    bool backward;              /* the _backward operators */
    const od_tensor *input, *grad_out, *weight, *bias;
    const od_tensor *rmean, *rvar;      /* batch norm's running statistics */
    const od_tensor *mean, *invstd;     /* backward: the forward's saved statistics */
    int64_t N, C, S, G;         /* G: groups (1 for batch norm) */
    bool train;
    double momentum, eps;
    bool mask[3];               /* backward's output_mask */
    od_dtype stat_dtype;        /* statistics and parameter gradients: the parameters' dtype */
} od_norm_plan;
od_status od_norm_plan_of(od_opid id, const od_stack *s, od_norm_plan *p, od_error *err);
/* _scaled_dot_product_attention_forward (shape_attention.c): the fused
 * kernels' plan, shared by the shape function and the CPU and CUDA kernels.
 * Pointers are borrowed from the stack. The output is [batch..., L, Ev] and
 * the weights [batch..., L, S] (need_weights) or [0] (unspecified, as 1.13
 * documents). Operand X's element (b, i, j) is at
 * xbase + sum_d(bidx[d] * xb[d]) + i * xr + j * xc, with 0 strides where X
 * broadcasts; the mask's likewise (mr/mc 0 where it broadcasts). */
typedef struct od_sdpa_plan {
    const od_tensor *q, *k, *v, *mask; /* mask NULL when absent */
    bool causal, need_weights;
    int nb;                                   /* output batch dims */
    int64_t bsizes[OD_MAX_DIMS];              /* their sizes */
    int64_t nbatch, L, S, E, Ev;
    int64_t qb[OD_MAX_DIMS], kb[OD_MAX_DIMS], vb[OD_MAX_DIMS], mb[OD_MAX_DIMS];
    int64_t qr, qc, kr, kc, vr, vc, mr, mc;
    double scale;                             /* 1 / sqrt(E), as ATen's double */
} od_sdpa_plan;
/* True when the fused kernels apply to s (dtypes f32/f64/bf16 alike, ranks
 * >= 2, batch dims that broadcast, a bool or floating mask that broadcasts to
 * the scores, no dropout, no mask with is_causal); then *p is filled. Every
 * other call runs _scaled_dot_product_attention_math, whose operators give
 * torch's errors. */
bool od_sdpa_plan_of(const od_stack *s, od_sdpa_plan *p);
/* Runs _scaled_dot_product_attention_math on s's arguments (borrowed) and
 * puts its returns (new) in s->rets: the kernels' answer where the plan does
 * not apply. */
od_status od_sdpa_run_math(od_stack *s, od_error *err);
/* nll_loss_forward, nll_loss2d_forward and their _backward (shape_loss.c):
 * the checked arguments, borrowed from the stack (weight NULL when None;
 * grad_output and total_weight only in the backward). self is read as
 * [batch, classes, map] (map = H * W for the 2d operators, 1 otherwise;
 * batch 1 for a 1-D self) and target as batch * map class indices, uint8
 * or int64, each ignore_index or in [0, classes). reduction: 0 none, 1 mean,
 * any other a sum; per_element: none with a batch dim (one loss per
 * target, total_weight 0), else one reduced loss. */
typedef struct od_nll_plan {
    const od_tensor *self, *target, *weight, *grad_output, *total_weight;
    bool backward, two_d, per_element;
    int64_t reduction, ignore_index;
    int64_t batch, classes, map;
} od_nll_plan;
od_status od_nll_plan_of(od_opid id, const od_stack *s, od_nll_plan *p, od_error *err);

/* ---- pooling (kernels/shape_pool.c): max_pool2d/3d_with_indices, avg_pool2d/3d,
 * _adaptive_avg_pool2d/3d, adaptive_max_pool2d/3d and their _backward ops ---- */
#include "od_pool.h"
/* The checked call: g is the geometry (od_pool.h; 2d pools as 3d with T of
 * 1); self is the forward input, grad the backward's grad_output, indices
 * the max pools' (borrowed from the stack; grad/indices NULL in forward);
 * planes = product of the lead (batch, channel) dims, in == planes x T x H
 * x W elements of self. */
typedef struct od_pool_plan {
    od_pool_geom g;
    const od_tensor *self, *grad, *indices;
    bool backward, with_indices;
    int nd, lead;
    int64_t planes;
} od_pool_plan;
od_status od_pool_plan_of(od_opid id, const od_stack *s, od_pool_plan *p, od_error *err);


/* ---- upsample_nearest1d/2d/3d, upsample_linear1d / bilinear2d / trilinear3d
 * (.vec too) and their _backward (kernels/shape_resample.c) ---- */
#include "od_resample.h"
/* The checked call: g is the geometry (od_resample.h; D, H, W with size-1
 * leading dims for 1d/2d); x is the forward input or the backward's
 * grad_output (borrowed); planes = N x C; the result has lead dims N, C
 * and spatial g.out (forward) or g.in (backward). */
typedef struct od_resample_plan {
    od_resample_geom g;
    const od_tensor *x;
    bool backward;
    int nd;
    int64_t n, c, planes;
} od_resample_plan;
od_status od_resample_plan_of(od_opid id, const od_stack *s, od_resample_plan *p, od_error *err);

/* ---- _embedding_bag, _embedding_bag_forward_only, _embedding_bag_dense_backward,
 * _embedding_bag_per_sample_weights_backward (kernels/shape_embedding_bag.c) ---- */
enum { OD_EMBAG_SUM = 0, OD_EMBAG_MEAN = 1, OD_EMBAG_MAX = 2 };
enum { OD_EMBAG_FWD, OD_EMBAG_DENSE_BW, OD_EMBAG_PSW_BW };
/* The checked call (every tensor borrowed from the stack; NULL where the
 * operator has no such argument or it is None). fwd: weight [V, D],
 * indices [n], offsets [nbags + ilo], psw [n]; dense backward: grad
 * [nbags, D], indices, offset2bag [n], bag_size [nbags], max_indices,
 * psw, V = num_weights; psw backward: grad, weight, indices, offsets,
 * offset2bag ([n], or empty: recomputed from offsets). Index tensors are
 * int32 or int64, except the forward's indices and offsets: any integer
 * dtypes whose promoted type (torch's promoteIndicesAndOffsets) is int32 or
 * int64, read through od_embag_index_at (idt: that type, what the index
 * outputs carry).
 * Data-dependent checks (offsets[0] == 0, offsets[-1] <= n, offsets
 * non-decreasing, 0 <= index < V) are od_embag_check_data's, which reads
 * host memory. */
typedef struct od_embag_plan {
    int kind, mode;
    bool ilo, sgbf;
    int64_t padding_idx; /* < 0: none */
    const od_tensor *weight, *indices, *offsets, *psw, *grad, *offset2bag, *bag_size, *max_indices;
    int64_t n, nbags, V, D;
    od_dtype dt, idt;
} od_embag_plan;
od_status od_embag_plan_of(od_opid id, const od_stack *s, od_embag_plan *p, od_error *err);
/* Element at (elements from base) of an integer index tensor of dtype dt. */
static inline int64_t od_embag_index_at(const void *base, od_dtype dt, int64_t at)
{
    switch (dt) {
    case OD_BOOL:
    case OD_UINT8: return ((const uint8_t *)base)[at];
    case OD_INT8: return ((const int8_t *)base)[at];
    case OD_INT16: return ((const int16_t *)base)[at];
    case OD_INT32: return ((const int32_t *)base)[at];
    default: return ((const int64_t *)base)[at];
    }
}
/* Reads offsets and indices (host memory, any strides) and checks them as
 * torch 1.13's CPU kernel does, with its messages. */
od_status od_embag_check_data(const od_embag_plan *p, od_error *err);
/* ---- binary_cross_entropy, glu, prelu and their _backward
 * (kernels/shape_act_loss.c) ---- */
enum { OD_AL_BCE, OD_AL_GLU, OD_AL_PRELU };
/* The checked call, tensors borrowed from the stack (grad NULL in a
 * forward; target, weight NULL where the operator has none or None was
 * passed; weight is prelu's weight too). n: self's elements. glu: self
 * viewed [outer, 2 * half, inner] around dim. prelu: element i of
 * contiguous self takes weight (i / inner) % channels (channels 1 for one
 * shared weight; bfloat16 self takes a weight of any dtype, as a bfloat16
 * copy). bce: reduction as ATen's int (1 mean, 2 sum, any other
 * none). */
typedef struct od_act_loss_plan {
    int kind;
    bool backward;
    const od_tensor *grad, *self, *target, *weight;
    int64_t reduction, n;
    int dim;
    int64_t outer, half, inner, channels;
    /* prelu_backward: the shape it runs over, self's and grad_output's
     * broadcast (larger than self's where ATen resizes its fresh outputs).
     * A per-channel weight is viewed [1, C, 1...] in self's rank, so in a
     * broadcast of higher rank its channels run along dim ndim - self's
     * ndim + 1 (inner: the product of the sizes after it), and the weight
     * gradient is ATen's collector.sum([0] + [2, self's ndim)) taken over the
     * broadcast's dims: it keeps the dims whose bit is set in wg_keep, shape
     * wg_sizes[0..wg_ndim) (the weight's own shape when the ranks agree). */
    int64_t sizes[OD_MAX_DIMS];
    int ndim;
    int64_t wg_sizes[OD_MAX_DIMS];
    int wg_ndim;
    uint32_t wg_keep;
} od_act_loss_plan;
od_status od_act_loss_plan_of(od_opid id, const od_stack *s, od_act_loss_plan *p, od_error *err);
/* ---- im2col, col2im, max_unpool2d/3d (kernels/shape_fold.c) ---- */
enum { OD_FOLD_IM2COL = 0, OD_FOLD_COL2IM = 1, OD_FOLD_UNPOOL = 2 };
/* The checked call (self, indices borrowed from the stack). im2col/col2im:
 * n samples (1 unbatched) of c image channels; the image img and the grid
 * of sliding blocks grid, with kernel k, stride s, padding p, dilation d,
 * each 3 dims with a leading 1 (od_conv_plan's layout); kvol = k[1] * k[2];
 * planes = n * c. max_unpool: planes = the lead dims' product, in_plane /
 * out_plane elements per plane of self / of the result, unpool_out the
 * output_size padded to 3 dims with leading 1s. */
typedef struct od_fold_plan {
    int kind; /* OD_FOLD_* */
    const od_tensor *self, *indices;
    bool batched;
    int unpool_nd;
    int64_t n, c, kvol, planes, in_plane, out_plane;
    int64_t img[3], grid[3], k[3], s[3], p[3], d[3], unpool_out[3];
} od_fold_plan;
od_status od_fold_plan_of(od_opid id, const od_stack *s, od_fold_plan *p, od_error *err);
/* torch's error for max_unpool index `bad` outside the output plane (the
 * CPU and CUDA kernels, which find it). */
od_status od_fold_unpool_bad_index(const od_fold_plan *p, int64_t bad, od_error *err);

/* ---- _cdist_forward, _cdist_backward, _pdist_forward, _pdist_backward (kernels/shape_dist.c) ---- */
#include "od_dist.h"
/* The checked call (tensors borrowed from the stack): x1 / x2 the cdist
 * operands or pdist's self (x2 NULL), grad and dist the backward's; batch
 * the broadcast batch dims (nbatch of them, product B); r1, r2 rows of x1
 * and x2 (pdist: r1 = n), m columns, combs = n(n-1)/2 for pdist. empty: a
 * result with no element (cdist backward: zeros_like(x1)); zeros: a result
 * of zeros (no columns, or a zero-p backward); mm: _cdist_forward takes the
 * matrix-product path (od_dist_mm). */
typedef struct od_dist_plan {
    int op; /* OD_DISTOP_* */
    const od_tensor *x1, *x2, *grad, *dist;
    double p;
    bool empty, zeros, mm;
    int nbatch;
    int64_t batch[OD_MAX_DIMS];
    int64_t B, r1, r2, m, combs;
} od_dist_plan;
od_status od_dist_plan_of(od_opid id, const od_stack *s, od_dist_plan *p, od_error *err);
/* _cdist_forward's matrix-product path through the dispatcher: the inputs
 * (expanded to the batch and viewed [B, r, m] when B != 1) to
 * _euclidean_dist, viewed as batch + [r1, r2]; *out new. */
od_status od_dist_mm(const od_dist_plan *p, od_tensor **out, od_error *err);

#endif
