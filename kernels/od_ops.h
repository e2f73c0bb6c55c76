/* od_ops.h — the built-in operators: ids, start-up, and the typed C API.
 *
 * Invariants: od_init() defines every operator of ops.def in list order and
 * registers every kernel family through the public registration API; it is
 * idempotent and thread-safe (first caller does the work). It does not
 * freeze the registry: the application freezes after adding its own.
 * OD_OPID_<id> == od_op_id(od_builtin(OD_OPID_<id>)).
 */
#ifndef OD_OPS_H
#define OD_OPS_H

#include "od_dispatch.h"

typedef enum od_opid {
#define OD_OP(id, schema, shape, cpu, cuda, cea, cia, bs, ag) OD_OPID_##id,
#include "ops.def"
#undef OD_OP
    OD_NUM_BUILTIN_OPS
} od_opid;

#define OD_OPID_OF_CTX(ctx) ((od_opid)(intptr_t)(ctx))

od_status od_init(od_error *err);
/* Borrowed handle of a built-in operator (valid after od_init). */
const od_op *od_builtin(od_opid id);

/* Family registration hooks called by od_init (each in its own folder). */
od_status od_register_cpu_kernels(od_error *err);
od_status od_register_composite_kernels(od_error *err);
od_status od_register_meta_kernels(od_error *err);
od_status od_register_cuda_kernels(od_error *err); /* only with OD_HAVE_CUDA */
od_status od_register_builtin_modes(od_error *err);      /* kernels/modes/: trace, profile, ... */
od_status od_register_reference_kernels(od_error *err); /* kernels/reference/: od::mm_reference */
od_status od_register_autocast_kernels(od_error *err);  /* kernels/autocast/ */

/* Runs built-in id on args (borrowed, nargs == the schema's argument count,
 * defaults filled by the caller) through the full dispatcher (od_call).
 * Returns values in s->rets (new). */
od_status od_call_builtin(od_opid id, od_value *args, int nargs, od_stack *s, od_error *err);
/* The same, taking the first return, which must be a tensor: *out new (any
 * other returns are released). */
od_status od_call_builtin1(od_opid id, od_value *args, int nargs, od_tensor **out, od_error *err);

/* ---- typed C API: tensors borrowed, *out new; stacks live on the C stack ---- */
od_status od_add(od_tensor *self, od_tensor *other, double alpha, od_tensor **out, od_error *err);
od_status od_sub(od_tensor *self, od_tensor *other, double alpha, od_tensor **out, od_error *err);
od_status od_mul(od_tensor *self, od_tensor *other, od_tensor **out, od_error *err);
od_status od_div(od_tensor *self, od_tensor *other, od_tensor **out, od_error *err);
od_status od_relu(od_tensor *self, od_tensor **out, od_error *err);
od_status od_sigmoid(od_tensor *self, od_tensor **out, od_error *err);
od_status od_mm(od_tensor *self, od_tensor *mat2, od_tensor **out, od_error *err);
od_status od_matmul(od_tensor *self, od_tensor *other, od_tensor **out, od_error *err);
/* dims: borrowed, ndims == 0 means every dim. */
od_status od_sum(od_tensor *self, const int64_t *dims, int ndims, bool keepdim, od_tensor **out,
                 od_error *err);
od_status od_softmax(od_tensor *self, int64_t dim, od_tensor **out, od_error *err);
od_status od_to_dtype(od_tensor *self, od_dtype dtype, od_tensor **out, od_error *err);
od_status od_to_device(od_tensor *self, od_device device, od_tensor **out, od_error *err);
/* For a tensor just decoded from a request: its copy on device is the leaf
 * that requires grad (as torch.tensor(data, device=..., requires_grad=True)),
 * not a ToCopyBackward0 node over a CPU leaf nobody holds. self borrowed
 * (its requires_grad flag is left as it was); *out new. */
od_status od_to_device_leaf(od_tensor *self, od_device device, od_tensor **out, od_error *err);
od_status od_zeros(const int64_t *sizes, int ndim, od_dtype dtype, od_device device,
                   od_tensor **out, od_error *err);

#endif
