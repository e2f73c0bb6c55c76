/* factories_blas.c — the CompositeExplicitAutograd kernels of eye / eye.m,
 * mv and addr (torch 1.13 registers these three as CEA: eye fills a fresh
 * tensor, mv is addmv_ into an empty result with beta 0, addr has its
 * math_addr fallback).
 *
 * Invariants: each checks its arguments with ATen's messages first, then
 * reaches other operators only through the dispatcher, so every backend
 * (Meta included) serves them. addr computes in ATen's CPU kernel's order,
 * (beta * self) + ((alpha * vec1) * vec2), in the promoted dtype, so float
 * results round as torch's do; beta == 0 never reads self.
 */
#include <inttypes.h>
#include <stdio.h>

#include "composite.h"
#include "od_shape.h"

#define T(t) od_tensor_v(t)

/* eye(n) / eye.m(n, m): zeros with the main diagonal (stride m + 1) set to 1 */
OD_CX_KERNEL(od_cea_eye)
{
    (void)op;
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_out_spec spec;
    int n = 0;
    od_status st = od_shape_eye(id, s, &spec, &n, err);
    if (st)
        return st;
    od_tensor *out = NULL;
    if ((st = od_alloc_outputs(s, &spec, 1, &out, err)))
        return st;
    if (out->device.type == OD_DEV_META || od_tensor_numel(out) == 0)
        return od_cx_return1(s, out);
    int64_t rows = spec.sizes[0], cols = spec.sizes[1];
    int64_t len = rows < cols ? rows : cols, stride = cols + 1;
    od_tensor *diag = NULL;
    od_stack fs;
    /* CPU memory comes zeroed; a device's cached block may hold old bytes */
    if (out->device.type != OD_DEV_CPU) {
        od_value z[2] = {T(out), od_int(0)};
        if ((st = od_call_builtin(OD_OPID_fill__Scalar, z, 2, &fs, err)))
            goto fail;
        od_stack_release_rets(&fs);
    }
    if ((st = od_tensor_as_strided(out, &len, &stride, 1, out->offset, &diag, err)))
        goto fail;
    od_value a[2] = {T(diag), od_int(1)};
    st = od_call_builtin(OD_OPID_fill__Scalar, a, 2, &fs, err);
    od_tensor_release(diag);
    if (st)
        goto fail;
    od_stack_release_rets(&fs);
    return od_cx_return1(s, out);
fail:
    od_tensor_release(out);
    return st;
}

/* mv(self, vec) = addmv(empty, self, vec, beta=0): ATen's mv is addmv_ into
 * an empty [n] result of vec's dtype, which beta 0 never reads */
OD_CX_KERNEL(od_cea_mv)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *vec;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &vec, err)))
        return st;
    int64_t n;
    if ((st = od_tensor_size_at(self, 0, &n, err)))
        return st;
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *r0 = od_cx_call(&sc, OD_OPID_zeros, 5, od_list_v(OD_T_INT_LIST, &n, 1), od_dtype_v(vec->dtype),
                               od_none(), od_device_v(self->device), od_none());
    od_tensor *r = r0 ? od_cx_call(&sc, OD_OPID_addmv, 5, T(r0), T(self), T(vec), od_int(0), od_int(1)) : NULL;
    return od_cx_scope_return1(&sc, s, r);
}

/* torch's legacy type name of t: torch.FloatTensor, torch.cuda.LongTensor */
static const char *legacy_type(const od_tensor *t, char *buf, size_t n)
{
    static const char *names[OD_NUM_DTYPES] = {
        [OD_BOOL] = "Bool", [OD_UINT8] = "Byte", [OD_INT8] = "Char", [OD_INT16] = "Short", [OD_INT32] = "Int",
        [OD_INT64] = "Long", [OD_FLOAT16] = "Half", [OD_BFLOAT16] = "BFloat16", [OD_FLOAT32] = "Float",
        [OD_FLOAT64] = "Double"};
    const char *nm = (unsigned)t->dtype < OD_NUM_DTYPES && names[t->dtype] ? names[t->dtype] : "Float";
    snprintf(buf, n, "torch.%s%sTensor", t->device.type == OD_DEV_CUDA ? "cuda." : "", nm);
    return buf;
}

/* ATen's check_addr_scalar */
static od_status addr_scalar(od_dtype dt, const od_value *v, const char *name, od_error *err)
{
    if (v->tag == OD_T_BOOL && dt != OD_BOOL)
        return od_error_set(err, OD_EINVAL, "Boolean %s only supported for Boolean results.", name);
    if (v->tag == OD_T_DOUBLE && !od_dtype_is_floating(dt))
        return od_error_set(err, OD_EINVAL,
                            "For integral input tensors, argument %s must not be a floating point number.", name);
    if (dt != OD_BOOL)
        return od_scalar_check_fits(v, dt, err);
    return OD_OK;
}

/* addr(self, vec1, vec2, *, beta, alpha) = beta * self + alpha * outer(vec1, vec2) */
OD_CX_KERNEL(od_cea_addr)
{
    (void)ctx;
    (void)ks;
    od_tensor *self, *v1, *v2;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &self, err)) || (st = od_cx_arg_tensor(op, s, 1, &v1, err)) ||
        (st = od_cx_arg_tensor(op, s, 2, &v2, err)))
        return st;
    if (!od_value_is_number(&s->args[3]) || !od_value_is_number(&s->args[4]))
        return od_error_set(err, OD_EINVAL, "addr(): arguments 'beta' and 'alpha' must be Scalars");
    if (v1->ndim != 1)
        return od_error_set(err, OD_EINVAL, "addr: Expected 1-D argument vec1, but got %d-D", v1->ndim);
    if (v2->ndim != 1)
        return od_error_set(err, OD_EINVAL, "addr: Expected 1-D argument vec2, but got %d-D", v2->ndim);
    int64_t sz[2] = {v1->sizes[0], v2->sizes[0]};
    char ts[64], ss[256], tn[40];
    od_shape_print(sz, 2, ts, sizeof ts);
    od_shape_print(self->sizes, self->ndim, ss, sizeof ss);
    if (self->ndim > 2)
        return od_error_set(err, OD_EMISMATCH,
                            "expand(%s{%s}, size=%s): the number of sizes provided (2) must be greater "
                            "or equal to the number of dimensions in the tensor (%d)",
                            legacy_type(self, tn, sizeof tn), ss, ts, self->ndim);
    for (int d = self->ndim - 1; d >= 0; d--) { /* torch checks from the last dim */
        int td = 2 - self->ndim + d;
        if (self->sizes[d] != 1 && self->sizes[d] != sz[td])
            return od_error_set(err, OD_EMISMATCH,
                                "The expanded size of the tensor (%" PRId64 ") must match the existing size (%" PRId64
                                ") at non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                                sz[td], self->sizes[d], td, ts, ss);
    }
    od_dtype dt = od_promote_types(od_promote_types(self->dtype, v1->dtype), v2->dtype);
    const od_value *beta = &s->args[3], *alpha = &s->args[4];
    if ((st = addr_scalar(dt, beta, "beta", err)) || (st = addr_scalar(dt, alpha, "alpha", err)))
        return st;
    bool beta0 = od_value_as_double(beta) == 0.0;

    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *a = self->dtype == dt ? self : od_cx_cast(&sc, self, dt);
    od_tensor *x = v1->dtype == dt ? v1 : od_cx_cast(&sc, v1, dt);
    od_tensor *y = v2->dtype == dt ? v2 : od_cx_cast(&sc, v2, dt);
    od_tensor *col = x ? od_cx_call(&sc, OD_OPID_unsqueeze, 2, T(x), od_int(1)) : NULL;
    od_tensor *r = NULL;
    if (dt == OD_BOOL) {
        /* (beta && self) || (alpha && vec1 && vec2): bool mul is and, add or */
        od_tensor *p = col && y ? od_cx_call(&sc, OD_OPID_mul_Tensor, 2, T(col), T(y)) : NULL;
        if (p && od_value_as_double(alpha) == 0.0)
            p = od_cx_call(&sc, OD_OPID_mul_Scalar, 2, T(p), od_bool(false));
        r = p && !beta0 ? od_cx_call(&sc, OD_OPID_add_Tensor, 3, T(a), T(p), od_int(1)) : p;
    } else {
        od_value av = od_dtype_is_floating(dt) ? od_double(od_value_as_double(alpha))
                                               : od_int(alpha->tag == OD_T_INT ? alpha->u.i : (int64_t)od_value_as_double(alpha));
        od_value bv = od_dtype_is_floating(dt) ? od_double(od_value_as_double(beta))
                                               : od_int(beta->tag == OD_T_INT ? beta->u.i : (int64_t)od_value_as_double(beta));
        od_tensor *ax = col ? od_cx_call(&sc, OD_OPID_mul_Scalar, 2, T(col), av) : NULL;
        od_tensor *p = ax && y ? od_cx_call(&sc, OD_OPID_mul_Tensor, 2, T(ax), T(y)) : NULL;
        if (beta0) {
            r = p;
        } else {
            od_tensor *bs = p && a ? od_cx_call(&sc, OD_OPID_mul_Scalar, 2, T(a), bv) : NULL;
            r = bs ? od_cx_call(&sc, OD_OPID_add_Tensor, 3, T(bs), T(p), od_int(1)) : NULL;
        }
    }
    return od_cx_scope_return1(&sc, s, r);
}
