/* attention.c — _scaled_dot_product_attention and its math path, as
 * torch 1.13 registers them (CompositeImplicitAutograd).
 *
 * Invariants:
 *  - _scaled_dot_product_attention runs _scaled_dot_product_attention_math
 *    when query, key or value requires grad (its decomposition records the
 *    graph), else the native _scaled_dot_product_attention_forward, whose
 *    CPU and CUDA kernels are the fused ones (torch 1.13's choice, same
 *    test). Modes and vmap see through both: each is a plain operator call.
 *  - The math path is ATen 1.13's, operator for operator (as a
 *    TorchDispatchMode records it): a floating mask of another dtype is
 *    converted to query's, query * (1 / sqrt(E)), is_causal's ones(L, S)
 *    .tril() bool mask, a bool mask as zeros_like(the scaled query's dtype)
 *    .masked_fill_(logical_not(mask), -inf), matmul(q, k^T).add_(mask),
 *    softmax(-1), matmul(attn, v); it returns (output, attn) whatever
 *    need_attn_weights says, as 1.13's CPU path does.
 *  - dropout_p > 0 is refused: random operators are out of scope here.
 */
#include <math.h>

#include "composite.h"

#define T(x) od_tensor_v(x)

static bool wants_grad(const od_tensor *t) { return t && t->requires_grad; }

static od_status refuse_dropout(double p, od_error *err)
{
    return od_error_set(err, OD_EUNSUPPORTED,
                        "_scaled_dot_product_attention: dropout_p=%g is not supported: opdispatch runs no "
                        "random operators (use dropout_p=0.0)",
                        p);
}

static od_status sdpa_math(const od_op *op, od_stack *s, od_error *err)
{
    od_tensor *q, *k, *v, *mask;
    bool need_w, causal;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &q, err)) || (st = od_cx_arg_tensor(op, s, 1, &k, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &v, err)) || (st = od_cx_arg_opt_tensor(op, s, 3, &mask, err)) ||
        (st = od_cx_arg_bool(op, s, 5, &need_w, err)) || (st = od_cx_arg_bool(op, s, 6, &causal, err)))
        return st;
    if (!od_value_is_number(&s->args[4]))
        return od_error_set(err, OD_EINVAL, "%s(): argument 'dropout_p' must be float", od_op_name(op));
    double dropout_p = od_value_as_double(&s->args[4]);
    if (q->ndim == 0)
        return od_error_set(err, OD_EINVAL, "Dimension specified as -1 but tensor has no dimensions");
    od_cx_scope sc = od_cx_scope_begin(err);
    if (mask && mask->dtype != OD_BOOL && mask->dtype != q->dtype)
        mask = od_cx_cast(&sc, mask, q->dtype);
    /* torch 1.13's CPU has no float16 matmul; here, as for the other
     * operators it lacks in float16, the math runs in float32 and the
     * results are rounded once (a score past 65504 stays finite) */
    bool up = q->dtype == OD_FLOAT16 && k->dtype == OD_FLOAT16 && v->dtype == OD_FLOAT16 &&
              q->device.type == OD_DEV_CPU;
    if (up) {
        q = od_cx_cast(&sc, q, OD_FLOAT32);
        k = od_cx_cast(&sc, k, OD_FLOAT32);
        v = od_cx_cast(&sc, v, OD_FLOAT32);
        if (mask && mask->dtype != OD_BOOL)
            mask = od_cx_cast(&sc, mask, OD_FLOAT32);
        if (sc.st)
            return od_cx_scope_end(&sc);
    }
    od_tensor *qs = od_cx_call(&sc, OD_OPID_mul_Scalar, 2, T(q), od_double(1.0 / sqrt((double)q->sizes[q->ndim - 1])));
    if (!sc.st && causal) {
        if (mask) {
            od_cx_scope_end(&sc);
            return od_error_set(err, OD_EINVAL, "_scaled_dot_product_attention: Explicit attn_mask should not "
                                                "be set when is_causal=True");
        }
        if (qs->ndim < 2 || k->ndim < 2) {
            int nd = qs->ndim < 2 ? qs->ndim : k->ndim; /* read before the scope frees qs */
            od_cx_scope_end(&sc);
            return od_error_set(err, OD_EINVAL,
                                "Dimension out of range (expected to be in range of [%d, %d], but got -2)",
                                nd ? -nd : -1, nd ? nd - 1 : 0);
        }
        int64_t ls[2] = {qs->sizes[qs->ndim - 2], k->sizes[k->ndim - 2]};
        od_tensor *ones = od_cx_call(&sc, OD_OPID_ones, 5, od_list_v(OD_T_INT_LIST, ls, 2), od_dtype_v(OD_BOOL),
                                     od_none(), od_device_v(q->device), od_none());
        mask = ones ? od_cx_call(&sc, OD_OPID_tril, 2, T(ones), od_int(0)) : NULL;
    }
    if (!sc.st && mask && mask->dtype == OD_BOOL) {
        /* the scaled query's dtype: float32 for an integral query (int * double) */
        od_tensor *z = od_cx_call(&sc, OD_OPID_zeros_like, 6, T(mask), od_dtype_v(qs->dtype), od_none(), od_none(),
                                  od_none(), od_none());
        od_tensor *inv = z ? od_cx_call(&sc, OD_OPID_logical_not, 1, T(mask)) : NULL;
        mask = inv ? od_cx_call(&sc, OD_OPID_masked_fill__Scalar, 3, T(z), T(inv), od_double(-INFINITY)) : NULL;
    }
    od_tensor *kt = qs ? od_cx_call(&sc, OD_OPID_transpose_int, 3, T(k), od_int(-2), od_int(-1)) : NULL;
    od_tensor *attn = kt ? od_cx_call(&sc, OD_OPID_matmul, 2, T(qs), T(kt)) : NULL;
    if (attn && mask)
        attn = od_cx_call(&sc, OD_OPID_add__Tensor, 3, T(attn), T(mask), od_int(1));
    attn = attn ? od_cx_call(&sc, OD_OPID_softmax_int, 3, T(attn), od_int(-1), od_none()) : NULL;
    if (!sc.st && dropout_p > 0) {
        od_cx_scope_end(&sc);
        return refuse_dropout(dropout_p, err);
    }
    od_tensor *out = attn ? od_cx_call(&sc, OD_OPID_matmul, 2, T(attn), T(v)) : NULL;
    if (up && out) {
        out = od_cx_cast(&sc, out, OD_FLOAT16);
        attn = od_cx_cast(&sc, attn, OD_FLOAT16);
    }
    od_tensor *r0 = od_cx_keep(out), *r1 = od_cx_keep(attn);
    (void)need_w;
    if ((st = od_cx_scope_end(&sc))) {
        od_tensor_release(r0);
        od_tensor_release(r1);
        return st;
    }
    s->rets[0] = T(r0);
    s->rets[1] = T(r1);
    s->nrets = 2;
    return OD_OK;
}

OD_CX_KERNEL(od_cia_sdpa)
{
    (void)ks;
    if (OD_OPID_OF_CTX(ctx) == OD_OPID__scaled_dot_product_attention_math)
        return sdpa_math(op, s, err);
    od_tensor *q, *k, *v;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &q, err)) || (st = od_cx_arg_tensor(op, s, 1, &k, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &v, err)))
        return st;
    od_opid target = wants_grad(q) || wants_grad(k) || wants_grad(v) ? OD_OPID__scaled_dot_product_attention_math
                                                                     : OD_OPID__scaled_dot_product_attention_forward;
    od_stack inner;
    if ((st = od_call_builtin(target, s->args, s->nargs, &inner, err)))
        return st;
    for (int i = 0; i < inner.nrets; i++)
        s->rets[i] = inner.rets[i];
    s->nrets = inner.nrets;
    return OD_OK;
}
