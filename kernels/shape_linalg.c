/* shape_linalg.c — shape and dtype functions of the LAPACK operators
 * (linalg_inv_ex, _linalg_solve_ex, linalg_cholesky_ex, linalg_qr,
 * _linalg_svd, _linalg_eigh, _linalg_det, _linalg_slogdet,
 * linalg_lu_factor_ex, linalg_solve_triangular, linalg_lstsq), their parsed
 * arguments and
 * torch 1.13's _linalg_check_errors messages.
 *
 * Invariants: nothing here touches tensor data or allocates. The checks and
 * their order follow the 1.13 meta functions (squareCheckInputs,
 * checkFloatingOrComplex, checkInputsSolver, the batch broadcast of
 * _linalg_broadcast_batch_dims); the dtype refusals of the CPU kernels'
 * dispatch ("lu_cpu" not implemented for 'Half') are od_linalg_check_dtype,
 * called by the backends after the shape function, so Meta accepts what
 * torch's Meta accepts. Every output is laid out contiguous (row-major):
 * values, not strides, are what callers compare.
 */
#include <stdio.h>
#include <string.h>

#include "od_shape.h"

static const od_tensor *tensor_arg(const od_stack *s, int i)
{
    return i < s->nargs && s->args[i].tag == OD_T_TENSOR ? s->args[i].u.t : NULL;
}

static bool bool_arg(const od_stack *s, int i, bool dflt)
{
    if (i >= s->nargs)
        return dflt;
    if (s->args[i].tag == OD_T_BOOL)
        return s->args[i].u.b;
    if (s->args[i].tag == OD_T_INT)
        return s->args[i].u.i != 0;
    return dflt;
}

static const char *api_of(od_opid id)
{
    switch (id) {
    case OD_OPID_linalg_inv_ex: return "linalg.inv";
    case OD_OPID__linalg_solve_ex: return "linalg.solve";
    case OD_OPID_linalg_cholesky_ex: return "linalg.cholesky";
    case OD_OPID_linalg_qr: return "linalg.qr";
    case OD_OPID__linalg_svd: return "linalg.svd";
    case OD_OPID__linalg_eigh: return "linalg.eigh";
    case OD_OPID__linalg_det: return "linalg.det";
    case OD_OPID__linalg_slogdet: return "linalg.slogdet";
    case OD_OPID_linalg_solve_triangular: return "linalg.solve_triangular";
    case OD_OPID_linalg_lstsq: return "linalg.lstsq";
    default: return "torch.lu_factor";
    }
}

/* squareCheckInputs / checkIsMatrix */
static od_status check_matrix(const char *api, const od_tensor *t, const char *name, bool square, od_error *err)
{
    if (t->ndim < 2)
        return od_error_set(err, OD_EINVAL, "%s: The input tensor %s must have at least 2 dimensions.", api, name);
    if (square && t->sizes[t->ndim - 1] != t->sizes[t->ndim - 2])
        return od_error_set(err, OD_EINVAL, "%s: %s must be batches of square matrices, but they are %lld by %lld matrices",
                            api, name, (long long)t->sizes[t->ndim - 2], (long long)t->sizes[t->ndim - 1]);
    return OD_OK;
}

/* checkFloatingOrComplex */
static od_status check_float(const char *api, const od_tensor *t, bool low_precision, od_error *err)
{
    if (!od_dtype_is_floating(t->dtype))
        return od_error_set(err, OD_EINVAL, "%s: Expected a floating point or complex tensor as input. Got %s", api,
                            od_dtype_scalar_name(t->dtype));
    if (!low_precision && t->dtype != OD_FLOAT32 && t->dtype != OD_FLOAT64)
        return od_error_set(err, OD_EINVAL, "%s: Low precision dtypes not supported. Got %s", api,
                            od_dtype_scalar_name(t->dtype));
    return OD_OK;
}

/* infer_size over the batch dims (all but the last two) of a and b, as
 * _linalg_broadcast_batch_dims_helper(a, b); tensor a is named first. */
static od_status batch_broadcast(const od_tensor *a, const od_tensor *b, int64_t *out, int *nout, od_error *err)
{
    int na = a->ndim - 2, nb = b->ndim - 2, n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t sa = ia >= 0 ? a->sizes[ia] : 1, sb = ib >= 0 ? b->sizes[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return od_error_set(err, OD_EINVAL,
                                "The size of tensor a (%lld) must match the size of tensor b (%lld) at non-singleton dimension %d",
                                (long long)sa, (long long)sb, i);
        out[i] = sa == 1 ? sb : sa;
    }
    *nout = n;
    return OD_OK;
}

static bool solve_is_vector_rhs(const od_tensor *A, const od_tensor *B)
{
    if (B->ndim == 1)
        return true;
    if (A->ndim < 1 || B->ndim != A->ndim - 1)
        return false;
    return memcmp(A->sizes, B->sizes, (size_t)B->ndim * sizeof(int64_t)) == 0;
}

static od_status mode_arg(const od_stack *s, int i, const char *dflt, const char **out)
{
    *out = dflt;
    if (i < s->nargs && s->args[i].tag == OD_T_STRING)
        *out = s->args[i].u.s;
    return OD_OK;
}

/* linalg_lstsq's checks in linalg_lstsq_out's order (1.13): ranks, the
 * rows, dtypes, the driver (lower-cased; CUDA takes gels only), the default
 * rcond (whose epsilon refuses non-float dtypes), the batch broadcast, then
 * the CPU dispatch's dtype refusal. */
static od_status parse_lstsq(const od_stack *s, const od_tensor *A, od_linalg_info *li, od_error *err)
{
    const od_tensor *B = tensor_arg(s, 1);
    if (!B)
        return od_error_set(err, OD_EINVAL, "linalg.lstsq(): argument 'b' must be Tensor");
    if (A->ndim < 2)
        return od_error_set(err, OD_EINVAL, "torch.linalg.lstsq: input must have at least 2 dimensions.");
    if (B->ndim < 1)
        return od_error_set(err, OD_EINVAL, "torch.linalg.lstsq: other must have at least 1 dimension.");
    int diff = A->ndim - B->ndim;
    if (diff < 0 || diff > 1)
        return od_error_set(err, OD_EINVAL,
                            "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1");
    int64_t m = A->sizes[A->ndim - 2], n = A->sizes[A->ndim - 1];
    if (m != (diff ? B->sizes[B->ndim - 1] : B->sizes[B->ndim - 2]))
        return od_error_set(err, OD_EINVAL, diff ? "torch.linalg.lstsq: input.size(-2) should match other.size(-1)"
                                                 : "torch.linalg.lstsq: input.size(-2) should match other.size(-2)");
    if (A->dtype != B->dtype)
        return od_error_set(err, OD_EINVAL,
                            "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype %s and other's dtype %s",
                            od_dtype_scalar_name(A->dtype), od_dtype_scalar_name(B->dtype));
    bool cuda = A->device.type == OD_DEV_CUDA;
    li->driver = cuda ? OD_LSTSQ_GELS : OD_LSTSQ_GELSY;
    if (s->nargs > 3 && s->args[3].tag == OD_T_STRING) {
        char d[8] = "";
        const char *v = s->args[3].u.s;
        size_t len = strlen(v);
        for (size_t i = 0; i < len && len < sizeof d; i++)
            d[i] = (char)(v[i] >= 'A' && v[i] <= 'Z' ? v[i] - 'A' + 'a' : v[i]);
        static const char *names[] = {"gels", "gelsy", "gelsd", "gelss"};
        int k = 0;
        while (k < 4 && strcmp(d, names[k]))
            k++;
        if (cuda ? k != OD_LSTSQ_GELS : k == 4)
            return od_error_set(err, OD_EINVAL, cuda ? "torch.linalg.lstsq: `driver` other than `gels` is not supported on CUDA"
                                                     : "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
        li->driver = k;
    }
    bool flt = A->dtype == OD_FLOAT32 || A->dtype == OD_FLOAT64;
    if (s->nargs > 2 && od_value_is_number(&s->args[2])) {
        li->rcond = od_value_as_double(&s->args[2]);
    } else {
        if (!flt)
            return od_error_set(err, OD_EINVAL, "This function doesn't handle types other than float and double");
        li->rcond = (A->dtype == OD_FLOAT32 ? 1.1920928955078125e-07 : 2.220446049250313e-16) * (double)(m > n ? m : n);
    }
    /* torch's linalg_solve_is_vector_rhs; a B one dim short that is not
     * the vector case reaches ATen's internal assert on its rows */
    li->vector_case = solve_is_vector_rhs(A, B);
    od_tensor Bm = *B; /* B as the matrix torch sees (sizes only) */
    if (li->vector_case) {
        Bm.ndim = B->ndim + 1;
        Bm.sizes[B->ndim] = 1;
    } else if (diff && (B->ndim < 2 || B->sizes[B->ndim - 2] != m)) {
        return od_error_set(err, OD_EINVAL, "input.size(-2) == other_2d.size(-2) INTERNAL ASSERT FAILED");
    }
    od_status st;
    if ((st = batch_broadcast(A, &Bm, li->batch, &li->nbatch, err)))
        return st;
    if (!flt)
        return od_error_set(err, OD_EUNSUPPORTED, "\"linalg_lstsq_cpu\" not implemented for '%s'", od_dtype_scalar_name(A->dtype));
    li->m = m;
    li->n = n;
    li->k = Bm.sizes[Bm.ndim - 1];
    li->nbatches = 1;
    for (int i = 0; i < li->nbatch; i++)
        li->nbatches *= li->batch[i];
    return OD_OK;
}

od_status od_linalg_parse(od_opid id, const od_stack *s, od_linalg_info *li, od_error *err)
{
    memset(li, 0, sizeof *li);
    const char *api = api_of(id);
    const od_tensor *A = tensor_arg(s, 0), *B = NULL;
    if (!A)
        return od_error_set(err, OD_EINVAL, "%s(): argument '%s' must be Tensor", api,
                            id == OD_OPID_linalg_cholesky_ex || id == OD_OPID_linalg_solve_triangular || id == OD_OPID_linalg_lstsq
                                ? "self"
                                : "A");
    od_status st;
    switch (id) {
    case OD_OPID_linalg_inv_ex:
        if ((st = check_matrix(api, A, "A", true, err)) || (st = check_float(api, A, false, err)))
            return st;
        li->check_errors = bool_arg(s, 1, false);
        break;
    case OD_OPID__linalg_solve_ex:
    case OD_OPID_linalg_solve_triangular: {
        B = tensor_arg(s, 1);
        if (!B)
            return od_error_set(err, OD_EINVAL, "%s(): argument 'B' must be Tensor", api);
        bool tri = id == OD_OPID_linalg_solve_triangular;
        if (tri) {
            li->upper = bool_arg(s, 2, false);
            li->left = bool_arg(s, 3, true);
            li->unitriangular = bool_arg(s, 4, false);
        } else {
            li->left = bool_arg(s, 2, true);
            li->check_errors = bool_arg(s, 3, false);
            if ((st = check_float(api, A, true, err)))
                return st;
            if (A->dtype != B->dtype)
                return od_error_set(err, OD_EINVAL,
                                    "linalg.solve: Expected A and B to have the same dtype, but found A of type %s and B of type %s instead",
                                    od_dtype_scalar_name(A->dtype), od_dtype_scalar_name(B->dtype));
            li->vector_case = solve_is_vector_rhs(A, B);
        }
        /* B as a matrix: the vector case is B.unsqueeze(-1) */
        int bnd = B->ndim + (li->vector_case ? 1 : 0);
        if ((st = check_matrix(api, A, "A", true, err)))
            return st;
        if (bnd < 2)
            return od_error_set(err, OD_EINVAL, "%s: The input tensor B must have at least 2 dimensions.", api);
        int64_t br = li->vector_case ? B->sizes[B->ndim - 1] : B->sizes[B->ndim - 2];
        int64_t bc = li->vector_case ? 1 : B->sizes[B->ndim - 1];
        int64_t n = A->sizes[A->ndim - 1];
        if (li->left ? n != br : n != bc)
            return od_error_set(err, OD_EINVAL, "%s: Incompatible shapes of A and B for the equation %s (%lldx%lld and %lldx%lld)",
                                api, li->left ? "AX = B" : "XA = B", (long long)n, (long long)n, (long long)br, (long long)bc);
        od_tensor Bm = *B; /* B_ as torch sees it (sizes only) */
        if (li->vector_case) {
            Bm.ndim = bnd;
            Bm.sizes[bnd - 1] = 1;
        }
        if ((st = batch_broadcast(&Bm, A, li->batch, &li->nbatch, err)))
            return st;
        if (!tri && !li->left && li->vector_case)
            return od_error_set(err, OD_EINVAL,
                                "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False. In this case linalg.solve is equivalent to B / A.squeeze(-1)");
        li->m = br;
        li->k = bc;
        li->n = n;
        break;
    }
    case OD_OPID_linalg_cholesky_ex:
        if ((st = check_matrix(api, A, "A", true, err)) || (st = check_float(api, A, true, err)))
            return st;
        li->upper = bool_arg(s, 1, false);
        li->check_errors = bool_arg(s, 2, false);
        break;
    case OD_OPID_linalg_qr: {
        if ((st = check_matrix(api, A, "A", false, err)) || (st = check_float(api, A, true, err)))
            return st;
        const char *mode;
        mode_arg(s, 1, "reduced", &mode);
        if (!strcmp(mode, "reduced"))
            li->mode = 0;
        else if (!strcmp(mode, "complete"))
            li->mode = 1;
        else if (!strcmp(mode, "r"))
            li->mode = 2;
        else
            return od_error_set(err, OD_EINVAL,
                                "qr received unrecognized mode '%s' but expected one of 'reduced' (default), 'r', or 'complete'", mode);
        break;
    }
    case OD_OPID__linalg_svd:
        if ((st = check_matrix(api, A, "A", false, err)) || (st = check_float(api, A, true, err)))
            return st;
        li->full = bool_arg(s, 1, false);
        li->compute = bool_arg(s, 2, true);
        break;
    case OD_OPID__linalg_eigh: {
        if ((st = check_matrix(api, A, "A", true, err)))
            return st;
        const char *uplo;
        mode_arg(s, 1, "L", &uplo);
        if (strlen(uplo) != 1 || (uplo[0] != 'L' && uplo[0] != 'U' && uplo[0] != 'l' && uplo[0] != 'u'))
            return od_error_set(err, OD_EINVAL, "Expected UPLO argument to be 'L' or 'U', but got %s", uplo);
        li->upper = uplo[0] == 'U' || uplo[0] == 'u';
        li->compute = bool_arg(s, 2, true);
        break;
    }
    case OD_OPID__linalg_det:
        if ((st = check_matrix(api, A, "A", true, err)) || (st = check_float(api, A, true, err)))
            return st;
        break;
    case OD_OPID__linalg_slogdet:
        if ((st = check_matrix(api, A, "A", true, err)) || (st = check_float(api, A, false, err)))
            return st;
        break;
    case OD_OPID_linalg_lu_factor_ex:
        if (A->ndim < 2) {
            char buf[256];
            int p = snprintf(buf, sizeof buf, "[");
            for (int i = 0; i < A->ndim; i++)
                p += snprintf(buf + p, sizeof buf - (size_t)p, "%s%lld", i ? ", " : "", (long long)A->sizes[i]);
            snprintf(buf + p, sizeof buf - (size_t)p, "]");
            return od_error_set(err, OD_EINVAL, "torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: %s instead", buf);
        }
        li->pivot = bool_arg(s, 1, true);
        li->check_errors = bool_arg(s, 2, false);
        break;
    case OD_OPID_linalg_lstsq:
        return parse_lstsq(s, A, li, err);
    default:
        return od_error_set(err, OD_EINTERNAL, "od_linalg_parse: not a LAPACK operator");
    }
    if (!B) {
        li->nbatch = A->ndim - 2;
        if (li->nbatch > 0)
            memcpy(li->batch, A->sizes, (size_t)li->nbatch * sizeof(int64_t));
        li->m = A->sizes[A->ndim - 2];
        li->n = A->sizes[A->ndim - 1];
    }
    li->nbatches = 1;
    for (int i = 0; i < li->nbatch; i++)
        li->nbatches *= li->batch[i];
    return OD_OK;
}

od_status od_linalg_check_dtype(od_opid id, const od_stack *s, od_error *err)
{
    const od_tensor *A = tensor_arg(s, 0);
    if (!A || A->dtype == OD_FLOAT32 || A->dtype == OD_FLOAT64)
        return OD_OK;
    /* ATen's kernels return before dispatching on an empty input, but for
     * geqrf and triangular_solve */
    if (od_tensor_numel(A) == 0 && id != OD_OPID_linalg_qr && id != OD_OPID_linalg_solve_triangular)
        return OD_OK;
    const char *k;
    switch (id) {
    case OD_OPID_linalg_cholesky_ex: k = "cholesky_cpu"; break;
    case OD_OPID_linalg_qr: k = "geqrf_cpu"; break;
    case OD_OPID__linalg_svd: k = "linalg_svd_cpu"; break;
    case OD_OPID__linalg_eigh: k = "linalg_eigh_cpu"; break;
    case OD_OPID_linalg_solve_triangular: k = "triangular_solve_cpu"; break;
    default: k = "lu_cpu"; break;
    }
    return od_error_set(err, OD_EUNSUPPORTED, "\"%s\" not implemented for '%s'", k, od_dtype_scalar_name(A->dtype));
}

/* out = batch ++ tail */
static void spec(od_out_spec *o, const od_linalg_info *li, od_dtype dt, od_device dev, int ntail, int64_t t0, int64_t t1)
{
    memset(o, 0, sizeof *o);
    o->dtype = dt;
    o->device = dev;
    o->alias_of = -1;
    o->ndim = li->nbatch + ntail;
    for (int i = 0; i < li->nbatch; i++)
        o->sizes[i] = li->batch[i];
    if (ntail > 0)
        o->sizes[li->nbatch] = t0;
    if (ntail > 1)
        o->sizes[li->nbatch + 1] = t1;
}

static void spec_empty(od_out_spec *o, od_dtype dt, od_device dev)
{
    memset(o, 0, sizeof *o);
    o->dtype = dt;
    o->device = dev;
    o->alias_of = -1;
    o->ndim = 1;
}

od_status od_shape_linalg(od_opid id, const od_stack *s, od_out_spec *outs, int *nouts, od_error *err)
{
    /* linalg_lstsq's residuals are sized by the ranks found: its kernels
     * size their outputs (od_linalg_lstsq_specs); torch has no Meta kernel
     * for it and refuses before any check */
    if (id == OD_OPID_linalg_lstsq)
        return od_error_set(err, OD_ENOKERNEL, "Could not run 'aten::linalg_lstsq.out' with arguments from the 'Meta' backend.");
    od_linalg_info li;
    od_status st = od_linalg_parse(id, s, &li, err);
    if (st)
        return st;
    const od_tensor *A = s->args[0].u.t;
    od_dtype dt = A->dtype;
    od_device dev = A->device;
    int64_t m = li.m, n = li.n, k = m < n ? m : n;
    /* A's own batch (LU, pivots, info of the solvers are A's, unbroadcast) */
    od_linalg_info la = li;
    la.nbatch = A->ndim - 2;
    memcpy(la.batch, A->sizes, (size_t)(la.nbatch > 0 ? la.nbatch : 0) * sizeof(int64_t));
    switch (id) {
    case OD_OPID_linalg_inv_ex:
    case OD_OPID_linalg_cholesky_ex:
        spec(&outs[0], &li, dt, dev, 2, n, n);
        spec(&outs[1], &li, OD_INT32, dev, 0, 0, 0);
        *nouts = 2;
        break;
    case OD_OPID__linalg_solve_ex:
        if (li.vector_case)
            spec(&outs[0], &li, dt, dev, 1, li.m, 0);
        else
            spec(&outs[0], &li, dt, dev, 2, li.m, li.k);
        spec(&outs[1], &la, dt, dev, 2, n, n);
        spec(&outs[2], &la, OD_INT32, dev, 1, n, 0);
        spec(&outs[3], &la, OD_INT32, dev, 0, 0, 0);
        *nouts = 4;
        break;
    case OD_OPID_linalg_solve_triangular: {
        const od_tensor *B = s->args[1].u.t;
        spec(&outs[0], &li, dt, dev, 2, li.m, li.k);
        (void)B;
        *nouts = 1;
        break;
    }
    case OD_OPID_linalg_qr:
        if (li.mode == 2)
            spec_empty(&outs[0], dt, dev);
        else
            spec(&outs[0], &li, dt, dev, 2, m, li.mode == 1 ? m : k);
        spec(&outs[1], &li, dt, dev, 2, li.mode == 1 ? m : k, n);
        *nouts = 2;
        break;
    case OD_OPID__linalg_svd:
        if (li.compute) {
            spec(&outs[0], &li, dt, dev, 2, m, li.full ? m : k);
            spec(&outs[2], &li, dt, dev, 2, li.full ? n : k, n);
        } else {
            spec_empty(&outs[0], dt, dev);
            spec_empty(&outs[2], dt, dev);
        }
        spec(&outs[1], &li, dt, dev, 1, k, 0);
        *nouts = 3;
        break;
    case OD_OPID__linalg_eigh:
        spec(&outs[0], &li, dt, dev, 1, n, 0);
        if (li.compute)
            spec(&outs[1], &li, dt, dev, 2, n, n);
        else
            spec_empty(&outs[1], dt, dev);
        *nouts = 2;
        break;
    case OD_OPID__linalg_det:
        spec(&outs[0], &li, dt, dev, 0, 0, 0);
        spec(&outs[1], &li, dt, dev, 2, n, n);
        spec(&outs[2], &li, OD_INT32, dev, 1, n, 0);
        *nouts = 3;
        break;
    case OD_OPID__linalg_slogdet:
        spec(&outs[0], &li, dt, dev, 0, 0, 0);
        spec(&outs[1], &li, dt, dev, 0, 0, 0);
        spec(&outs[2], &li, dt, dev, 2, n, n);
        spec(&outs[3], &li, OD_INT32, dev, 1, n, 0);
        *nouts = 4;
        break;
    default: /* linalg_lu_factor_ex */
        spec(&outs[0], &li, dt, dev, 2, m, n);
        spec(&outs[1], &li, OD_INT32, dev, 1, k, 0);
        spec(&outs[2], &li, OD_INT32, dev, 0, 0, 0);
        *nouts = 3;
        break;
    }
    return OD_OK;
}

void od_linalg_lstsq_specs(const od_stack *s, const od_linalg_info *li, bool residuals, od_out_spec *outs)
{
    const od_tensor *A = s->args[0].u.t;
    od_dtype dt = A->dtype;
    od_device dev = A->device;
    int64_t k = li->m < li->n ? li->m : li->n;
    od_linalg_info la = *li; /* rank and singular values: A's own batch */
    la.nbatch = A->ndim - 2;
    memcpy(la.batch, A->sizes, (size_t)la.nbatch * sizeof(int64_t));
    if (li->vector_case)
        spec(&outs[0], li, dt, dev, 1, li->n, 0);
    else
        spec(&outs[0], li, dt, dev, 2, li->n, li->k);
    if (residuals)
        spec(&outs[1], li, dt, dev, 1, li->k, 0);
    else
        spec_empty(&outs[1], dt, dev);
    if (li->driver == OD_LSTSQ_GELS)
        spec_empty(&outs[2], OD_INT64, dev);
    else
        spec(&outs[2], &la, OD_INT64, dev, 0, 0, 0);
    if (li->driver == OD_LSTSQ_GELSD || li->driver == OD_LSTSQ_GELSS)
        spec(&outs[3], &la, dt, dev, 1, k, 0);
    else
        spec_empty(&outs[3], dt, dev);
}

od_status od_linalg_info_error(const char *api, const int32_t *info, int64_t n, bool batched, od_error *err)
{
    int64_t i = 0;
    while (i < n && info[i] == 0)
        i++;
    if (i == n)
        return OD_OK;
    int v = info[i];
    char bs[64] = "";
    if (batched)
        snprintf(bs, sizeof bs, ": (Batch element %lld)", (long long)i);
    if (v < 0) {
        if (strstr(api, "svd") && v == -4)
            return od_error_set(err, OD_EINVAL, "%s%s: The algorithm failed to converge because the input matrix contained non-finite values.", api, bs);
        return od_error_set(err, OD_EINTERNAL, "%s%s: Argument %d has illegal value. Most certainly there is a bug in the implementation calling the backend library.", api, bs, -v);
    }
    if (strstr(api, "lstsq"))
        return od_error_set(err, OD_EINVAL, "%s%s: The least squares solution could not be computed because the input matrix does not have full rank (error code: %d).", api, bs, v);
    if (strstr(api, "inv"))
        return od_error_set(err, OD_EINVAL, "%s%s: The diagonal element %d is zero, the inversion could not be completed because the input matrix is singular.", api, bs, v);
    if (strstr(api, "solve"))
        return od_error_set(err, OD_EINVAL, "%s%s: The solver failed because the input matrix is singular.", api, bs);
    if (strstr(api, "cholesky"))
        return od_error_set(err, OD_EINVAL, "%s%s: The factorization could not be completed because the input is not positive-definite (the leading minor of order %d is not positive-definite).", api, bs, v);
    if (strstr(api, "svd"))
        return od_error_set(err, OD_EINVAL, "%s%s: The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated singular values (error code: %d).", api, bs, v);
    if (strstr(api, "eig"))
        return od_error_set(err, OD_EINVAL, "%s%s: The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated eigenvalues (error code: %d).", api, bs, v);
    if (strstr(api, "lu_factor"))
        return od_error_set(err, OD_EINVAL, "%s%s: U[%d,%d] is zero and using it on lu_solve would result in a division by zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)", api, bs, v, v);
    return od_error_set(err, OD_EINTERNAL, "%s: Unknown error code: %d.", api, v);
}
