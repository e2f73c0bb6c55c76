/* linalg.c — aten::matmul and aten::linear in terms of dot / mm / bmm /
 * addmm and views.
 *
 * Invariants: matmul follows torch's _matmul_impl case by case (1.13): dot
 * for 1-D·1-D, mm (with unsqueeze / view for vectors) for ranks <= 2, the
 * operand of rank >= 3 folded into one mm when the other is a vector or
 * matrix (the second operand transposed and folded when it is the larger;
 * unless torch's should_fold keeps it: a 3-D operand with its last two dims
 * transposed), and otherwise bmm over the broadcast batch dims with
 * both operands expanded and reshaped to 3-D. Shape and dtype errors of the
 * products come from their own kernels, so they read exactly as for mm/bmm.
 */
#include <string.h>

#include "composite.h"

/* Product of sizes[0..n). Sizes are validated tensor sizes, so no overflow. */
static int64_t prod(const int64_t *sizes, int n)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= sizes[i];
    return p;
}

static od_status call2(od_opid id, od_tensor *a, od_tensor *b, od_tensor **out, od_error *err)
{
    od_value v[2] = {od_tensor_v(a), od_tensor_v(b)};
    return od_call_builtin1(id, v, 2, out, err);
}

/* r = view(r, sizes) consuming the old r. */
static od_status view_into(od_tensor **r, const int64_t *sizes, int n, od_error *err)
{
    od_tensor *v = NULL;
    od_status st = od_cx_view(*r, sizes, n, &v, err);
    od_tensor_release(*r);
    *r = v;
    return st;
}

/* a (1-D or 2-D) @ b (1-D or 2-D), not both 1-D. */
static od_status matmul_small(od_tensor *a, od_tensor *b, od_tensor **out, od_error *err)
{
    od_tensor *u = NULL, *r = NULL;
    od_status st;
    if (a->ndim == 2 && b->ndim == 2)
        return od_cx_mm(a, b, out, err);
    if (a->ndim == 2) /* matrix @ vector: mv, as ATen (its dtype rule and message) */
        return call2(OD_OPID_mv, a, b, out, err);
    /* vector @ matrix: a as a row */
    if ((st = od_cx_unsqueeze(a, 0, &u, err)))
        return st;
    st = od_cx_mm(u, b, &r, err);
    od_tensor_release(u);
    if (st)
        return st;
    int64_t n = b->sizes[1];
    if ((st = view_into(&r, &n, 1, err)))
        return st;
    *out = r;
    return OD_OK;
}

/* a of rank >= 3 @ b of rank 1 or 2: one mm (mv for a vector b) over a
 * reshaped to [prod(batch) * n, k], then the result viewed back. */
static od_status matmul_fold(od_tensor *a, od_tensor *b, od_tensor **out, od_error *err)
{
    /* The folded size is computed, not inferred: -1 is ambiguous when k == 0. */
    int64_t folded[2] = {prod(a->sizes, a->ndim - 1), a->sizes[a->ndim - 1]};
    od_tensor *a2 = NULL, *r = NULL;
    od_status st = od_cx_reshape(a, folded, 2, &a2, err);
    if (st)
        return st;
    st = b->ndim == 1 ? call2(OD_OPID_mv, a2, b, &r, err) : od_cx_mm(a2, b, &r, err);
    od_tensor_release(a2);
    if (st)
        return st;
    int64_t shape[OD_MAX_DIMS];
    int n = a->ndim - 1;
    for (int i = 0; i < n; i++)
        shape[i] = a->sizes[i];
    if (b->ndim == 2)
        shape[n++] = b->sizes[1];
    if ((st = view_into(&r, shape, n, err)))
        return st;
    *out = r;
    return OD_OK;
}

/* General case: broadcast the batch dims, bmm, view to the result shape. */
static od_status matmul_batched(od_tensor *a, od_tensor *b, od_tensor **out, od_error *err)
{
    int d1 = a->ndim, d2 = b->ndim;
    int64_t n = d1 > 1 ? a->sizes[d1 - 2] : 1, m1 = a->sizes[d1 - 1];
    int64_t m2 = d2 > 1 ? b->sizes[d2 - 2] : b->sizes[0], p = d2 > 1 ? b->sizes[d2 - 1] : 1;
    int nb1 = d1 > 2 ? d1 - 2 : 0, nb2 = d2 > 2 ? d2 - 2 : 0, nb;
    int64_t batch[OD_MAX_DIMS];
    od_status st = od_broadcast_shapes(a->sizes, nb1, b->sizes, nb2, batch, &nb, err);
    if (st)
        return st;
    int64_t bp = prod(batch, nb);

    int64_t ea[OD_MAX_DIMS], eb[OD_MAX_DIMS];
    for (int i = 0; i < nb; i++)
        ea[i] = eb[i] = batch[i];
    ea[nb] = n, ea[nb + 1] = m1;
    eb[nb] = m2, eb[nb + 1] = p;
    int64_t va[3] = {bp, n, m1}, vb[3] = {bp, m2, p};

    od_tensor *bcol = NULL, *ax = NULL, *bx = NULL, *a3 = NULL, *b3 = NULL, *r = NULL;
    /* A vector second operand is a column (torch only gets here with a
     * matrix or batch, but the identity holds either way). */
    if (d2 == 1 && (st = od_cx_unsqueeze(b, 1, &bcol, err)))
        return st;
    if (!(st = od_cx_expand(a, ea, nb + 2, &ax, err)) &&
        !(st = od_cx_expand(bcol ? bcol : b, eb, nb + 2, &bx, err)) &&
        !(st = od_cx_reshape(ax, va, 3, &a3, err)) && !(st = od_cx_reshape(bx, vb, 3, &b3, err)))
        st = call2(OD_OPID_bmm, a3, b3, &r, err);
    od_tensor_release(bcol);
    od_tensor_release(ax);
    od_tensor_release(bx);
    od_tensor_release(a3);
    od_tensor_release(b3);
    if (st)
        return st;

    int64_t shape[OD_MAX_DIMS];
    int k = nb;
    for (int i = 0; i < nb; i++)
        shape[i] = batch[i];
    if (d1 > 1)
        shape[k++] = n;
    if (d2 > 1)
        shape[k++] = p;
    if ((st = view_into(&r, shape, k, err)))
        return st;
    *out = r;
    return OD_OK;
}

/* torch 1.13's should_fold(t1, t2): t1 of rank >= 3 folds into one mm
 * against t2 of rank 1 or 2, unless t1 is a [b, n, k] whose first dim
 * moves slowest and last two are transposed (permute(0, 2, 1)) and t2 a
 * matrix, which bmm takes without the copy a fold would make */
static bool should_fold(const od_tensor *t1, const od_tensor *t2)
{
    bool transposed3 =
        t1->ndim == 3 && t2->ndim == 2 && t1->strides[2] != 1 && t1->strides[0] == t1->sizes[1] * t1->sizes[2];
    return t1->ndim >= 3 && t2->ndim <= 2 && !transposed3;
}

/* transpose(-2, -1) of t, by the operator (a view): *out new */
static od_status transpose_last2(od_tensor *t, od_tensor **out, od_error *err)
{
    od_value v[3] = {od_tensor_v(t), od_int(-2), od_int(-1)};
    return od_call_builtin1(OD_OPID_transpose_int, v, 3, out, err);
}

/* a of rank 1 or 2 @ b of rank >= 3, folded as torch 1.13 does it: b^T
 * (transpose(-2, -1)) folded against a (a^T for a matrix), and a matrix's
 * result transposed back and made contiguous. mm's and mv's dtype rules
 * then apply with the operands in that order. */
static od_status matmul_fold_transposed(od_tensor *a, od_tensor *b, od_tensor **out, od_error *err)
{
    od_tensor *bt = NULL, *at = NULL, *r = NULL, *rt = NULL;
    od_status st = transpose_last2(b, &bt, err);
    if (!st && a->ndim == 2)
        st = od_cx_t(a, &at, err);
    if (!st)
        st = matmul_fold(bt, at ? at : a, &r, err);
    od_tensor_release(bt);
    od_tensor_release(at);
    if (st || a->ndim == 1) {
        *out = r;
        return st;
    }
    if (!(st = transpose_last2(r, &rt, err)) && !od_tensor_is_contiguous(rt)) {
        st = od_cx_clone(rt, OD_MF_CONTIGUOUS, out, err);
        od_tensor_release(rt);
    } else if (!st) {
        *out = rt; /* an empty or one-row result is already contiguous */
    }
    od_tensor_release(r);
    return st;
}

static od_status matmul(od_tensor *a, od_tensor *b, od_tensor **out, od_error *err)
{
    int d1 = a->ndim, d2 = b->ndim;
    if (d1 == 0 || d2 == 0)
        return od_error_set(err, OD_EMISMATCH,
                            "both arguments to matmul need to be at least 1D, but they are %dD and %dD",
                            d1, d2);
    if (d1 == 1 && d2 == 1)
        return call2(OD_OPID_dot, a, b, out, err);
    if (d1 <= 2 && d2 <= 2)
        return matmul_small(a, b, out, err);
    if (should_fold(a, b))
        return matmul_fold(a, b, out, err);
    if (should_fold(b, a))
        return matmul_fold_transposed(a, b, out, err);
    return matmul_batched(a, b, out, err);
}

OD_CX_KERNEL(od_cia_matmul)
{
    (void)ctx;
    (void)ks;
    od_tensor *a, *b, *out = NULL;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &a, err)) || (st = od_cx_arg_tensor(op, s, 1, &b, err)))
        return st;
    if ((st = matmul(a, b, &out, err)))
        return st;
    return od_cx_return1(s, out);
}

/* output.add_(bias) as torch 1.13's linear does it: in place, so the result
 * keeps output's shape and dtype (aten::add_.Tensor checks both). Consumes
 * *out; *out is the result, or NULL on error. */
static od_status add_bias_inplace(od_tensor **out, od_tensor *bias, od_error *err)
{
    od_tensor *sum = NULL;
    od_value a[3] = {od_tensor_v(*out), od_tensor_v(bias), od_int(1)};
    od_status st = od_call_builtin1(OD_OPID_add__Tensor, a, 3, &sum, err);
    od_tensor_release(*out);
    *out = sum;
    return st;
}

/* linear(input, weight, bias?) as torch 1.13 computes it: one fused addmm
 * for a biased 2-D input or a contiguous 3-D one (viewed as 2-D), else
 * input @ weight.t() and then an in-place add of the bias. Which path runs
 * decides the result dtype and which dtype mixes raise, so it is kept. */
OD_CX_KERNEL(od_cia_linear)
{
    (void)ctx;
    (void)ks;
    od_tensor *input, *weight, *bias, *wt = NULL, *in2 = NULL, *out = NULL;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &input, err)) ||
        (st = od_cx_arg_tensor(op, s, 1, &weight, err)) ||
        (st = od_cx_arg_opt_tensor(op, s, 2, &bias, err)))
        return st;
    if ((st = od_cx_t(weight, &wt, err)))
        return st;
    bool fused3 = input->ndim == 3 && od_tensor_is_contiguous(input);
    if (bias && (input->ndim == 2 || fused3)) {
        if (fused3) {
            int64_t flat[2] = {input->sizes[0] * input->sizes[1], input->sizes[2]};
            st = od_cx_view(input, flat, 2, &in2, err);
        } else {
            od_tensor_retain(in2 = input);
        }
        if (!st) {
            od_value a[5] = {od_tensor_v(bias), od_tensor_v(in2), od_tensor_v(wt), od_int(1), od_int(1)};
            st = od_call_builtin1(OD_OPID_addmm, a, 5, &out, err);
        }
        od_tensor_release(in2);
        od_tensor_release(wt);
        if (!st && fused3) {
            int64_t sz[3] = {input->sizes[0], input->sizes[1], out->sizes[1]};
            st = view_into(&out, sz, 3, err);
        }
        if (st)
            return st;
        return od_cx_return1(s, out);
    }
    od_value mv[2] = {od_tensor_v(input), od_tensor_v(wt)};
    st = od_call_builtin1(OD_OPID_matmul, mv, 2, &out, err);
    od_tensor_release(wt);
    if (!st && bias)
        st = add_bias_inplace(&out, bias, err);
    if (st)
        return st;
    return od_cx_return1(s, out);
}
