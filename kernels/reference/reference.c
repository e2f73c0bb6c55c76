/* reference.c — naive reference kernels, as operators of their own in the
 * "od" namespace, for the override mode ({"override": {"mm":
 * "mm_reference"}}) and for checking a fast kernel against an obvious one.
 *
 * Invariants: each reference operator takes exactly its aten twin's
 * arguments, computes in double with plain loops over strides (no BLAS, no
 * threads), and is registered on CPU only: slow by design, and clear.
 */
#include <string.h>

#include "od_ops.h"

static od_status mm_reference(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ctx;
    (void)ks;
    od_tensor *a = s->args[0].tag == OD_T_TENSOR ? s->args[0].u.t : NULL;
    od_tensor *b = s->args[1].tag == OD_T_TENSOR ? s->args[1].u.t : NULL;
    if (!a || !b)
        return od_error_set(err, OD_EMISMATCH, "%s: expected two tensors", od_op_name(op));
    if (a->ndim != 2 || b->ndim != 2)
        return od_error_set(err, OD_EMISMATCH, "self must be a matrix");
    if (a->sizes[1] != b->sizes[0])
        return od_error_set(err, OD_EMISMATCH,
                            "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                            (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
                            (long long)b->sizes[1]);
    if (a->dtype != b->dtype)
        return od_error_set(err, OD_EMISMATCH, "expected scalar type %s but found %s",
                            od_dtype_scalar_name(a->dtype), od_dtype_scalar_name(b->dtype));
    if (a->dtype != OD_FLOAT32 && a->dtype != OD_FLOAT64)
        return od_error_set(err, OD_EUNSUPPORTED, "%s: float32 and float64 only, got %s", od_op_name(op),
                            od_dtype_name(a->dtype));
    int64_t m = a->sizes[0], k = a->sizes[1], n = b->sizes[1], sizes[2] = {m, n};
    od_tensor *out = NULL;
    od_status st = od_tensor_empty(sizes, 2, a->dtype, a->device, &out, err);
    if (st)
        return st;
    const char *pa = od_tensor_data(a), *pb = od_tensor_data(b);
    char *po = od_tensor_data(out);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++) {
                int64_t ia = i * a->strides[0] + p * a->strides[1], ib = p * b->strides[0] + j * b->strides[1];
                acc += a->dtype == OD_FLOAT32 ? (double)((const float *)pa)[ia] * ((const float *)pb)[ib]
                                              : ((const double *)pa)[ia] * ((const double *)pb)[ib];
            }
            if (a->dtype == OD_FLOAT32)
                ((float *)po)[i * n + j] = (float)acc;
            else
                ((double *)po)[i * n + j] = acc;
        }
    s->rets[0] = od_tensor_v(out);
    s->nrets = 1;
    return OD_OK;
}

od_status od_register_reference_kernels(od_error *err)
{
    od_op *op = NULL;
    od_status st = OD_DEF("od::mm_reference(Tensor self, Tensor mat2) -> Tensor", &op, err);
    if (!st)
        st = OD_IMPL(op, OD_KEY_CPU, mm_reference, NULL, err);
    return st;
}
