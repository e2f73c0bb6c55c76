/* composite.h — private to kernels/composite/: the composite and
 * BackendSelect kernels, and the argument/call helpers they share.
 *
 * Invariants: every kernel here is boxed (od_value.h rules: arguments
 * borrowed, returns new) and receives ctx = OD_OPID_<id>. Kernels reach other
 * operators only through the dispatcher (od_cx_call*), never by calling
 * another family's kernel functions, so the same composite serves CPU, CUDA
 * and Meta tensors. Nothing outside this folder includes this header.
 */
#ifndef OD_COMPOSITE_H
#define OD_COMPOSITE_H

#include "od_ops.h"

#define OD_CX_KERNEL(name) \
    od_status name(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)

/* Kernels named in ops.def's cea / cia / bs columns. */
OD_CX_KERNEL(od_cea_view);
OD_CX_KERNEL(od_cia_reshape);
OD_CX_KERNEL(od_cia_contiguous);
OD_CX_KERNEL(od_cea_to_copy);
OD_CX_KERNEL(od_cia_to);
OD_CX_KERNEL(od_cea_stack);
OD_CX_KERNEL(od_cia_softmax);
OD_CX_KERNEL(od_cia_layer_norm);
OD_CX_KERNEL(od_cia_matmul);
OD_CX_KERNEL(od_cia_linear);
OD_CX_KERNEL(od_cia_embedding);
OD_CX_KERNEL(od_cea_factory);
OD_CX_KERNEL(od_bs_factory);
OD_CX_KERNEL(od_cea_like); /* *_like, new_* */
OD_CX_KERNEL(od_cia_defined_by); /* square, rsub.Tensor, true_divide, positive, celu, selu, log_sigmoid(_forward) */
OD_CX_KERNEL(od_cia_inplace); /* every OD_INPLACE line */
OD_CX_KERNEL(od_cea_constant_pad_nd); /* shapes.c */
OD_CX_KERNEL(od_cea_repeat);
OD_CX_KERNEL(od_cea_flip);
OD_CX_KERNEL(od_cea_roll);
OD_CX_KERNEL(od_cx_tril_triu);
OD_CX_KERNEL(od_cia_index);     /* index.Tensor (advindex.c) */
OD_CX_KERNEL(od_cia_index_put); /* index_put */
OD_CX_KERNEL(od_cia_argsort); /* argsort, argsort.stable, msort (shorthands.c) */
OD_CX_KERNEL(od_cia_outer);   /* outer, ger */
OD_CX_KERNEL(od_cia_vdot);
OD_CX_KERNEL(od_cia_trace); /* tril, triu (cea); tril_, triu_ (cia) */
OD_CX_KERNEL(od_cea_reduce_logical); /* reductions.c: all, any */
OD_CX_KERNEL(od_cea_count_nonzero);
OD_CX_KERNEL(od_cea_max_min); /* max, min, max.dim, min.dim */
OD_CX_KERNEL(od_cea_nansum);
OD_CX_KERNEL(od_cea_logsumexp);
OD_CX_KERNEL(od_cea_std_var_mean); /* std, var_mean, std_mean */
OD_CX_KERNEL(od_cea_aminmax);
OD_CX_KERNEL(od_cia_nanmean);
OD_CX_KERNEL(od_cea_norm); /* norm.Scalar ... norm.ScalarOpt_dim_dtype, linalg_vector_norm */
OD_CX_KERNEL(od_cia_isclose); /* predicates.c: isclose, allclose */
OD_CX_KERNEL(od_cea_masked_select); /* indexing.c */
OD_CX_KERNEL(od_cea_eye); /* factories_blas.c: eye, eye.m */
OD_CX_KERNEL(od_cea_mv);
OD_CX_KERNEL(od_cea_addr);
OD_CX_KERNEL(od_cea_index_add);
OD_CX_KERNEL(od_cea_index_copy);
OD_CX_KERNEL(od_cea_index_fill); /* index_fill.int_Scalar, .int_Tensor */
OD_CX_KERNEL(od_cia_index_fill_);
OD_CX_KERNEL(od_cia_split);         /* viewlists.c: split.Tensor, split_with_sizes, unbind.int, chunk, where */
OD_CX_KERNEL(od_cia_diag);
OD_CX_KERNEL(od_cea_view_scatter);  /* diag_embed, narrow_copy, diagonal_scatter, as_strided_scatter */
OD_CX_KERNEL(od_cea_view_inplace);  /* squeeze_, squeeze_.dim, unsqueeze_, transpose_, resize_ */

/* diagonal(self, offset, dim1, dim2) as a view of self (metadata only; self
 * borrowed, *out new): od_cea_view's diagonal and the composites' own. */
od_status od_cx_diagonal_view(od_tensor *self, int64_t offset, int64_t dim1, int64_t dim2, od_tensor **out,
                              od_error *err);
OD_CX_KERNEL(od_cia_linalg_wrap); /* lapack.c: linalg_inv, linalg_solve(_ex), linalg_cholesky, linalg_svd, linalg_eigh, linalg_det, linalg_slogdet, linalg_lu_factor */
OD_CX_KERNEL(od_cea_slice_scatter); /* scatters.c: slice_scatter, select_scatter */
OD_CX_KERNEL(od_cea_masked_scatter);
OD_CX_KERNEL(od_cia_masked_scatter_);
OD_CX_KERNEL(od_cea_put);
OD_CX_KERNEL(od_cea_rot90);
OD_CX_KERNEL(od_cia_repeat_interleave); /* .self_Tensor, .self_int */
OD_CX_KERNEL(od_cia_batch_norm);    /* nn.c: batch_norm, _batch_norm_impl_index */
OD_CX_KERNEL(od_cia_instance_norm);
OD_CX_KERNEL(od_cia_group_norm);
OD_CX_KERNEL(od_cia_sdpa); /* attention.c: _scaled_dot_product_attention, _math */
OD_CX_KERNEL(od_cia_nll_loss);            /* loss.c: nll_loss, nll_loss2d, nll_loss_nd */
OD_CX_KERNEL(od_cia_cross_entropy_loss);
OD_CX_KERNEL(od_cea_mse_loss);            /* mse_loss, mse_loss_backward */
OD_CX_KERNEL(od_cia_l1_loss);
OD_CX_KERNEL(od_cea_smooth_l1_huber); /* smooth_l1_loss, huber_loss and their _backward */
OD_CX_KERNEL(od_cea_bce_with_logits);    /* loss_more.c: binary_cross_entropy_with_logits */
OD_CX_KERNEL(od_cia_kl_div);
OD_CX_KERNEL(od_cea_soft_margin_loss);   /* soft_margin_loss, soft_margin_loss_backward */
OD_CX_KERNEL(od_cia_pool); /* pool.c: max_pool1d/2d/3d, max_pool1d_with_indices, avg_pool1d, adaptive_avg_pool1d/2d/3d, adaptive_max_pool1d */
OD_CX_KERNEL(od_cea_pixel_shuffle); /* resample.c: pixel_shuffle, pixel_unshuffle */
OD_CX_KERNEL(od_cia_conv); /* conv.c: conv1d..3d (+ .padding), conv_transpose1d..3d */
OD_CX_KERNEL(od_cia_embedding_bag); /* embedding_bag.c: embedding_bag (+ .padding_idx), _embedding_bag_backward */
OD_CX_KERNEL(od_cia_cdist); /* dist.c: cdist, pdist (over _cdist_forward / _euclidean_dist, _pdist_forward) */
OD_CX_KERNEL(od_cia_pdist);
OD_CX_KERNEL(od_cea_euclidean_dist);

/* Caches the positions of the factories' keyword arguments (start-up only). */
void od_cx_factories_init(void);

/* ---- calls through the dispatcher ---- */

/* One-line wrappers over od_call_builtin1 (tensors borrowed, *out new). */
od_status od_cx_view(od_tensor *t, const int64_t *sizes, int n, od_tensor **out, od_error *err);
od_status od_cx_reshape(od_tensor *t, const int64_t *sizes, int n, od_tensor **out, od_error *err);
od_status od_cx_expand(od_tensor *t, const int64_t *sizes, int n, od_tensor **out, od_error *err);
od_status od_cx_unsqueeze(od_tensor *t, int64_t dim, od_tensor **out, od_error *err);
od_status od_cx_t(od_tensor *t, od_tensor **out, od_error *err);
od_status od_cx_mm(od_tensor *a, od_tensor *b, od_tensor **out, od_error *err);
/* clone(t, memory_format=mf) through the dispatcher. */
od_status od_cx_clone(od_tensor *t, od_memory_format mf, od_tensor **out, od_error *err);
/* _to_copy(t, dtype=dtype) with every other argument defaulted. */
od_status od_cx_to_dtype_copy(od_tensor *t, od_dtype dtype, od_tensor **out, od_error *err);

/* Stores t (new) as the kernel's only return. */
static inline od_status od_cx_return1(od_stack *s, od_tensor *t)
{
    s->rets[0] = od_tensor_v(t);
    s->nrets = 1;
    return OD_OK;
}

/* ---- argument readers: i is the schema position; errors name the op's
 * argument like PyTorch's argument parser ("view(): argument 'size' must be
 * ..."). Pointers written are borrowed from the stack. ---- */

od_status od_cx_arg_tensor(const od_op *op, const od_stack *s, int i, od_tensor **t, od_error *err);
/* *t = NULL for None. */
od_status od_cx_arg_opt_tensor(const od_op *op, const od_stack *s, int i, od_tensor **t,
                               od_error *err);
od_status od_cx_arg_int(const od_op *op, const od_stack *s, int i, int64_t *v, od_error *err);
/* *present = false for None (then *v is untouched). */
od_status od_cx_arg_opt_int(const od_op *op, const od_stack *s, int i, bool *present, int64_t *v,
                            od_error *err);
od_status od_cx_arg_bool(const od_op *op, const od_stack *s, int i, bool *v, od_error *err);
od_status od_cx_arg_int_list(const od_op *op, const od_stack *s, int i, const int64_t **items,
                             int *n, od_error *err);
/* Tensor[] whose elements are all non-NULL. */
od_status od_cx_arg_tensor_list(const od_op *op, const od_stack *s, int i, od_tensor ***items,
                                int *n, od_error *err);
/* ScalarType?: a dtype value or a dtype name; *present false for None. */
od_status od_cx_arg_opt_dtype(const od_op *op, const od_stack *s, int i, bool *present,
                              od_dtype *dt, od_error *err);
/* Device?: a device value or a device string; *present false for None. */
od_status od_cx_arg_opt_device(const od_op *op, const od_stack *s, int i, bool *present,
                               od_device *d, od_error *err);
/* Layout?: only None or torch.strided (0 / "strided") are supported. */
od_status od_cx_check_layout(const od_op *op, const od_stack *s, int i, od_error *err);
/* bool? pin_memory: None or a bool. Pinning only speeds host-device copies,
 * which ours stage themselves, so _to_copy(pin_memory=True) is an ordinary
 * copy (torch 1.13 accepts it on the CPU too). */
od_status od_cx_check_pin_memory(const od_op *op, const od_stack *s, int i, od_error *err);

/* A MemoryFormat(?) argument into *mf (an od_memory_format); None reads as
 * preserve. */
od_status od_cx_arg_memory_format(const od_op *op, const od_stack *s, int i, int *mf,
                                  od_error *err);

/* Position of the argument called name in op's schema, or -1. */
int od_cx_arg_index(const od_op *op, const char *name);

/* ---- a scope for composites of several calls (as autograd's ag_scope):
 * od_cx_call's results belong to the scope (borrowed by the caller) and are
 * released by od_cx_scope_end; after the first failure every later call
 * returns NULL and does nothing, so a chain needs one check at its end. ---- */
#define OD_CX_SCOPE_MAX 128 /* advanced indexing: about 9 per dim of self */
typedef struct od_cx_scope {
    od_status st;
    od_error *err;
    int n;
    od_tensor *tmp[OD_CX_SCOPE_MAX];
} od_cx_scope;

static inline od_cx_scope od_cx_scope_begin(od_error *err) { return (od_cx_scope){OD_OK, err, 0, {0}}; }
/* Built-in id on nargs od_values (every schema argument, defaults filled; a
 * NULL tensor value means an earlier call failed): the first return, owned
 * by the scope, or NULL. */
od_tensor *od_cx_call(od_cx_scope *sc, od_opid id, int nargs, ...);
/* A new reference to t (for returning it past the scope's end). */
od_tensor *od_cx_keep(od_tensor *t);
/* _to_copy(t, dtype) with every other argument defaulted, in the scope. */
od_tensor *od_cx_cast(od_cx_scope *sc, od_tensor *t, od_dtype dtype);
/* Releases the scope's tensors; returns its status. */
od_status od_cx_scope_end(od_cx_scope *sc);
/* Ends the scope and, if it succeeded, stores t (a scope tensor, borrowed)
 * as the kernel's only return (a new reference). */
od_status od_cx_scope_return1(od_cx_scope *sc, od_stack *s, od_tensor *t);

#endif
