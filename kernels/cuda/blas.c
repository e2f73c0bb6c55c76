/* blas.c — mm, bmm, addmm, addmv, baddbmm, addbmm and dot on CUDA through
 * cuBLAS.
 *
 * Invariants:
 *  - Row-major C[n, m] = A[n, k] B[k, m] is computed as the column-major
 *    product C^T = B^T A^T, so the output needs no transpose. An operand is
 *    passed without a copy when one of its two matrix strides is 1 and the
 *    other is a valid leading dimension (row-major: "N"; column-major, i.e.
 *    a transposed view: "T"); otherwise it is made contiguous first.
 *  - float32 computes in float32 (CUBLAS_COMPUTE_32F, no TF32) unless
 *    od_cuda_set_allow_tf32(true); float16 and bfloat16 use cublasGemmEx /
 *    cublasGemmStridedBatchedEx with float accumulation (CUBLAS_COMPUTE_32F);
 *    float64 CUBLAS_COMPUTE_64F. Integer and bool products are unsupported on
 *    CUDA, as in PyTorch.
 *  - Sizes beyond cuBLAS's 32-bit ints are rejected with OD_EUNSUPPORTED.
 */
#include <limits.h>
#include <string.h>

#include "cuda_internal.h"


static bool cublas_type(od_dtype dt, cudaDataType_t *t)
{
    switch (dt) {
    case OD_FLOAT16: *t = CUDA_R_16F; return true;
    case OD_BFLOAT16: *t = CUDA_R_16BF; return true;
    case OD_FLOAT32: *t = CUDA_R_32F; return true;
    case OD_FLOAT64: *t = CUDA_R_64F; return true;
    default: return false;
    }
}

/* A matrix operand as cuBLAS sees it. */
typedef struct mat {
    od_tensor *t;      /* owned reference (possibly a contiguous copy) */
    cublasOperation_t op;
    int64_t ld;
    int64_t batch_stride;
} mat;

/* Matrix dims (r, c) of t are dims nd-2, nd-1. Decides N / T without a copy
 * when the strides allow, else copies to contiguous (enqueued on env). */
static od_status mat_of(const od_cu_env *env, od_tensor *t, mat *m, od_error *err)
{
    int nd = t->ndim;
    int64_t r = t->sizes[nd - 2], c = t->sizes[nd - 1];
    int64_t sr = t->strides[nd - 2], sc = t->strides[nd - 1];
    m->batch_stride = nd == 3 ? t->strides[0] : 0;
    if (nd == 3 && t->sizes[0] == 1)
        m->batch_stride = 0;
    /* Row-major with leading dimension sr (a size-1 dim's stride is free). */
    int64_t rsr = r == 1 ? (c > 1 ? c : 1) : sr, rsc = c == 1 ? 1 : sc;
    if (rsc == 1 && rsr >= (c > 1 ? c : 1)) {
        od_tensor_retain(t);
        m->t = t;
        m->op = CUBLAS_OP_N;
        m->ld = rsr;
        return OD_OK;
    }
    /* Column-major (a transposed view) with leading dimension sc. */
    int64_t csr = r == 1 ? 1 : sr, csc = c == 1 ? (r > 1 ? r : 1) : sc;
    if (csr == 1 && csc >= (r > 1 ? r : 1)) {
        od_tensor_retain(t);
        m->t = t;
        m->op = CUBLAS_OP_T;
        m->ld = csc;
        return OD_OK;
    }
    od_status st = od_cu_contiguous(env, t, &m->t, err);
    if (st)
        return st;
    m->op = CUBLAS_OP_N;
    m->ld = c > 1 ? c : 1;
    m->batch_stride = nd == 3 && t->sizes[0] > 1 ? r * c : 0;
    return OD_OK;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

/* C[batch][n][m] (contiguous, out) = alpha * A @ B + beta * C. */
static od_status gemm(const od_cu_env *env, const od_op *op, od_tensor *a, od_tensor *b, od_tensor *out,
                      int64_t batch, double alpha, double beta, od_error *err)
{
    int nd = a->ndim;
    int64_t n = a->sizes[nd - 2], k = a->sizes[nd - 1], m = b->sizes[nd - 1];
    if (!fits_int(n) || !fits_int(k) || !fits_int(m) || !fits_int(batch))
        return od_error_set(err, OD_EUNSUPPORTED,
                            "%s: matrix sizes beyond 2^31 - 1 are not supported on CUDA",
                            od_cu_op_name(op));
    mat A = {0}, B = {0};
    od_status st;
    cublasHandle_t h;
    if ((st = mat_of(env, a, &A, err)) || (st = mat_of(env, b, &B, err)) ||
        (st = od_cu_blas_handle(env, &h, err)))
        goto out;
    if (!fits_int(A.ld) || !fits_int(B.ld)) {
        st = od_error_set(err, OD_EUNSUPPORTED, "%s: leading dimension beyond 2^31 - 1 on CUDA",
                          od_cu_op_name(op));
        goto out;
    }
    cudaDataType_t ty = CUDA_R_32F;
    cublas_type(out->dtype, &ty);
    cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
    float af = (float)alpha, bf = (float)beta;
    const void *pa = &af, *pb = &bf;
    if (out->dtype == OD_FLOAT64) {
        ct = CUBLAS_COMPUTE_64F;
        pa = &alpha;
        pb = &beta;
    } else if (out->dtype == OD_FLOAT32 && od_cuda_get_allow_tf32()) {
        ct = CUBLAS_COMPUTE_32F_FAST_TF32;
    }
    /* Column-major: C^T (m x n, ld m) = op(B^T) (m x k) * op(A^T) (k x n). */
    cublasStatus_t cs;
    if (batch == 1 && nd == 2)
        cs = cublasGemmEx(h, B.op, A.op, (int)m, (int)n, (int)k, pa, od_tensor_data(B.t), ty, (int)B.ld,
                          od_tensor_data(A.t), ty, (int)A.ld, pb, od_tensor_data(out), ty, (int)m, ct,
                          CUBLAS_GEMM_DEFAULT);
    else
        cs = cublasGemmStridedBatchedEx(h, B.op, A.op, (int)m, (int)n, (int)k, pa, od_tensor_data(B.t), ty,
                                        (int)B.ld, B.batch_stride, od_tensor_data(A.t), ty, (int)A.ld,
                                        A.batch_stride, pb, od_tensor_data(out), ty, (int)m, n * m, (int)batch,
                                        ct, CUBLAS_GEMM_DEFAULT);
    st = od_cu_blas_status(cs, od_cu_op_name(op), err);
out:
    /* A contiguous copy goes back to the shared cache on release: the
     * product reading it must have finished first. */
    if ((A.t && A.t != a) || (B.t && B.t != b)) {
        od_status fs = od_cu_finish(env, od_cu_op_name(op), st ? NULL : err);
        if (!st)
            st = fs;
    }
    od_tensor_release(A.t);
    od_tensor_release(B.t);
    return st;
}

static od_status dot(const od_cu_env *env, const od_op *op, od_tensor *a, od_tensor *b, od_tensor *out,
                     od_error *err)
{
    int64_t n = a->sizes[0];
    if (!fits_int(n) || (n > 0 && (!fits_int(a->strides[0]) || !fits_int(b->strides[0]))))
        return od_error_set(err, OD_EUNSUPPORTED, "%s: vectors beyond 2^31 - 1 elements on CUDA",
                            od_cu_op_name(op));
    od_tensor *x = NULL, *y = NULL;
    od_status st;
    cublasHandle_t h;
    cudaDataType_t ty = CUDA_R_32F;
    cublas_type(out->dtype, &ty);
    /* A zero stride (expanded vector) is no valid cuBLAS increment: copy. */
    if (a->strides[0] == 0 && n > 1)
        st = od_cu_contiguous(env, a, &x, err);
    else {
        od_tensor_retain(a);
        x = a;
        st = OD_OK;
    }
    if (st)
        return st;
    if (b->strides[0] == 0 && n > 1)
        st = od_cu_contiguous(env, b, &y, err);
    else {
        od_tensor_retain(b);
        y = b;
    }
    if (st || (st = od_cu_blas_handle(env, &h, err)))
        goto out;
    if (n == 0) {
        /* An empty dot product is 0. */
        st = od_cu_status(cudaMemsetAsync(od_tensor_data(out), 0, od_dtype_size(out->dtype), env->stream),
                          "cudaMemsetAsync", err);
        goto out;
    }
    int incx = x->ndim && n > 1 ? (int)x->strides[0] : 1, incy = y->ndim && n > 1 ? (int)y->strides[0] : 1;
    if ((st = od_cu_blas_status(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode",
                                err)))
        goto out;
    cublasStatus_t cs = cublasDotEx(h, (int)n, od_tensor_data(x), ty, incx, od_tensor_data(y), ty, incy,
                                    od_tensor_data(out), ty, out->dtype == OD_FLOAT64 ? CUDA_R_64F : CUDA_R_32F);
    /* The handle is shared by this thread's later products: restore host mode. */
    cublasStatus_t rs = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    if (!(st = od_cu_blas_status(cs, od_cu_op_name(op), err)))
        st = od_cu_blas_status(rs, "cublasSetPointerMode", err);
out:
    if ((x && x != a) || (y && y != b)) { /* copies are released only after their reader ran */
        od_status fs = od_cu_finish(env, od_cu_op_name(op), st ? NULL : err);
        if (!st)
            st = fs;
    }
    od_tensor_release(x);
    od_tensor_release(y);
    return st;
}

/* out = beta * self + alpha * a @ b (batch products when batch > 1), as
 * addmm does: beta == 0 never reads self, an empty sum is beta * self.
 * self == NULL: out already holds it. out: contiguous, a float dtype
 * unless the sum is empty. */
static od_status addmm_into(const od_cu_env *env, const od_op *op, od_tensor *self, od_tensor *a, od_tensor *b,
                            od_tensor *out, int64_t batch, double alpha, double beta, od_error *err)
{
    bool empty_k = a->sizes[a->ndim - 1] == 0;
    od_status st;
    if (beta == 0.0) {
        if (empty_k || alpha == 0.0)
            return od_cu_status(cudaMemsetAsync(od_tensor_data(out), 0, od_tensor_nbytes(out), env->stream),
                                "cudaMemsetAsync", err);
        return gemm(env, op, a, b, out, batch, alpha, 0.0, err);
    }
    if (self && (st = od_cu_copy_same_device(env, out, self, err)))
        return st;
    if (!empty_k)
        return gemm(env, op, a, b, out, batch, alpha, beta, err);
    if (out->dtype == OD_BOOL) /* self * true */
        return OD_OK;
    od_cu_iter it;
    od_cu_iter_init(&it, out);
    if ((st = od_cu_iter_add_tensor(&it, out, err)))
        return st;
    od_value bv = od_double(beta);
    od_cu_iter_add_scalar(&it, &bv);
    return od_cu_run_elementwise(env, &it, OD_CU_EW_MUL, out->dtype, 0, 0, NULL, err);
}

/* addmv: mat @ vec as [n, k] @ [k, 1] into out viewed as [n, 1]; baddbmm: the
 * batched addmm; addbmm: one addmm per batch into out, beta on the first
 * (ATen's order of the sum). Integer dtypes are refused like ATen's CUDA
 * kernels, after their empty shortcuts. */
static od_status addmv_bmm(const od_cu_env *env, const od_op *op, od_opid id, od_stack *s, od_tensor *out,
                           od_error *err)
{
    od_tensor *self = s->args[0].u.t, *a = s->args[1].u.t, *b = s->args[2].u.t;
    double beta = od_value_as_double(&s->args[3]), alpha = od_value_as_double(&s->args[4]);
    cudaDataType_t ty;
    int64_t k = a->sizes[a->ndim - 1];
    bool empty = k == 0 || (id == OD_OPID_addbmm && a->sizes[0] == 0);
    if (od_tensor_numel(out) == 0)
        return OD_OK;
    if (!empty && !cublas_type(out->dtype, &ty))
        return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'",
                            id == OD_OPID_addmv ? "addmv_impl_cuda" : id == OD_OPID_baddbmm ? "baddbmm_cuda" : "addmm_cuda",
                            od_dtype_scalar_name(out->dtype));
    od_status st = OD_OK;
    if (id == OD_OPID_baddbmm)
        return addmm_into(env, op, self, a, b, out, a->sizes[0], alpha, beta, err);
    if (id == OD_OPID_addmv) {
        od_tensor *v2 = NULL, *o2 = NULL, *s2 = NULL;
        if (!(st = od_tensor_unsqueeze(b, 1, &v2, err)) && !(st = od_tensor_unsqueeze(out, 1, &o2, err))) {
            if (self->ndim == 1)
                st = od_tensor_unsqueeze(self, 1, &s2, err);
            else
                od_tensor_retain(s2 = self);
            if (!st)
                st = addmm_into(env, op, s2, a, v2, o2, 1, alpha, beta, err);
        }
        od_tensor_release(v2);
        od_tensor_release(o2);
        od_tensor_release(s2);
        return st;
    }
    if (empty) /* no batches: beta * self */
        return addmm_into(env, op, self, a, b, out, 1, alpha, beta, err);
    for (int64_t i = 0; i < a->sizes[0] && !st; i++) {
        od_tensor *x = NULL, *y = NULL;
        if (!(st = od_tensor_select(a, 0, i, &x, err)) && !(st = od_tensor_select(b, 0, i, &y, err)))
            st = addmm_into(env, op, i ? NULL : self, x, y, out, 1, alpha, i ? 1.0 : beta, err);
        od_tensor_release(x);
        od_tensor_release(y);
    }
    return st;
}

od_status od_cuda_blas(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device, n = 0;
    od_cu_env env;
    od_tensor *out = NULL;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)) || (st = od_cu_begin(device, &env, err)) ||
        (st = od_cu_outputs(id, s, device, &out, &n, err)))
        return st;
    if (id == OD_OPID_addmv || id == OD_OPID_baddbmm || id == OD_OPID_addbmm) {
        st = addmv_bmm(&env, op, id, s, out, err);
        od_status fs = od_cu_finish(&env, od_cu_op_name(op), st ? NULL : err);
        if (!st)
            st = fs;
        if (st)
            goto fail;
        od_cu_return(s, &out, 1);
        return OD_OK;
    }
    cudaDataType_t ty;
    bool trivial = (id == OD_OPID_mm || id == OD_OPID_bmm) && od_mm_is_trivial(s->args[0].u.t, s->args[1].u.t);
    if (!trivial && !cublas_type(out->dtype, &ty)) {
        /* PyTorch's names: mm and addmm both run "addmm_cuda". */
        const char *fn = id == OD_OPID_bmm ? "bmm_cuda" : id == OD_OPID_dot ? "dot_cuda" : "addmm_cuda";
        st = od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", fn,
                          od_dtype_scalar_name(out->dtype));
        goto fail;
    }
    switch (id) {
    case OD_OPID_mm:
    case OD_OPID_bmm: {
        od_tensor *a = s->args[0].u.t, *b = s->args[1].u.t;
        int64_t batch = id == OD_OPID_bmm ? a->sizes[0] : 1;
        int64_t kk = a->sizes[a->ndim - 1];
        if (od_tensor_numel(out) == 0)
            break;
        if (kk == 0) /* an empty sum: zeros (any dtype, bool included) */
            st = od_cu_status(cudaMemsetAsync(od_tensor_data(out), 0, od_tensor_nbytes(out), env.stream),
                              "cudaMemsetAsync", err);
        else
            st = gemm(&env, op, a, b, out, batch, 1.0, 0.0, err);
        break;
    }
    case OD_OPID_addmm: {
        od_tensor *self = s->args[0].u.t, *a = s->args[1].u.t, *b = s->args[2].u.t;
        double beta = od_value_as_double(&s->args[3]), alpha = od_value_as_double(&s->args[4]);
        if (od_tensor_numel(out) == 0)
            break;
        bool empty_k = a->sizes[1] == 0;
        if (beta == 0.0) {
            /* PyTorch ignores self when beta is 0 (NaN in self does not leak). */
            if (empty_k || alpha == 0.0)
                st = od_cu_status(cudaMemsetAsync(od_tensor_data(out), 0, od_tensor_nbytes(out), env.stream),
                                  "cudaMemsetAsync", err);
            else
                st = gemm(&env, op, a, b, out, 1, alpha, 0.0, err);
            break;
        }
        /* out = self (broadcast), then out = alpha * a @ b + beta * out. */
        if ((st = od_cu_copy_same_device(&env, out, self, err)))
            break;
        if (empty_k) {
            od_cu_iter it;
            od_cu_iter_init(&it, out);
            if ((st = od_cu_iter_add_tensor(&it, out, err)))
                break;
            od_value bv = od_double(beta);
            od_cu_iter_add_scalar(&it, &bv);
            st = od_cu_run_elementwise(&env, &it, OD_CU_EW_MUL, out->dtype, 0, 0, NULL, err);
        } else {
            st = gemm(&env, op, a, b, out, 1, alpha, beta, err);
        }
        break;
    }
    case OD_OPID_dot:
        st = dot(&env, op, s->args[0].u.t, s->args[1].u.t, out, err);
        break;
    default:
        st = od_error_set(err, OD_EINTERNAL, "od_cuda_blas: unexpected operator %s", od_cu_op_name(op));
        break;
    }
    {
        od_status fs = od_cu_finish(&env, od_cu_op_name(op), st ? NULL : err);
        if (!st)
            st = fs;
    }
    if (st)
        goto fail;
    od_cu_return(s, &out, 1);
    return OD_OK;
fail:
    od_tensor_release(out);
    return st;
}
