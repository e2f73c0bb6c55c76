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

typedef struct od_out_spec {
    od_dtype dtype;
    od_device device;
    int ndim;
    int64_t sizes[OD_MAX_DIMS];
    int alias_of; /* >= 0: this return IS argument alias_of (in-place ops) */
} od_out_spec;

typedef od_status (*od_shape_fn)(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts,
                                 od_error *err);

/* Allocates the outputs described by specs (alias_of returns retain that
 * argument). outs[i] are new references; on error none are left allocated. */
od_status od_alloc_outputs(const od_stack *s, const od_out_spec *specs, int n, od_tensor **outs,
                           od_error *err);

/* The shape function of a built-in, or NULL. */
od_shape_fn od_builtin_shape_fn(od_opid id);

#define OD_SHAPE_FNS(X) \
    X(od_shape_binary) X(od_shape_compare) X(od_shape_where) X(od_shape_unary) \
    X(od_shape_clamp) X(od_shape_reduce) X(od_shape_softmax) X(od_shape_layer_norm) \
    X(od_shape_matmul) X(od_shape_cat) X(od_shape_same) X(od_shape_inplace) \
    X(od_shape_index_select) X(od_shape_factory) X(od_shape_arange)

#define OD_X_(fn) od_status fn(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, \
                                od_error *err);
OD_SHAPE_FNS(OD_X_)
#undef OD_X_

/* ---- helpers shared by shape functions and kernels ---- */

/* Reduction dims: from an int[1]? / int[1] / int? argument (None or [] = all
 * dims) into a bitmask over ndim dims; errors name the argument "dim". */
od_status od_reduce_dims(const od_value *dim_arg, int ndim, uint32_t *mask, od_error *err);

/* Dtype a Scalar argument contributes to result_type (bool/int/float). */
od_result_arg od_result_arg_of_value(const od_value *v);

#endif
