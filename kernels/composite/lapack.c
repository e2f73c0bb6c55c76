/* lapack.c — the public LAPACK names torch 1.13 registers as
 * CompositeImplicitAutograd: linalg_inv, linalg_solve, linalg_solve_ex,
 * linalg_cholesky, linalg_svd, linalg_eigh, linalg_det, linalg_slogdet and
 * linalg_lu_factor, each one call of its kernel operator (linalg_inv_ex,
 * _linalg_solve_ex, linalg_cholesky_ex, _linalg_svd, _linalg_eigh,
 * _linalg_det, _linalg_slogdet, linalg_lu_factor_ex).
 *
 * Invariants: the kernel operator is reached through the dispatcher only, so
 * every backend and the OpInfo recorder see it, as in torch. The raising
 * names then check the info tensor as torch's _linalg_check_errors does
 * (same api name, "(Batch element i)" when A is batched); a Meta info is not
 * read, as torch's is not. Only the returns torch's wrapper keeps are
 * returned (new references); the rest are released.
 */
#include "composite.h"
#include "od_shape.h"

#define T(t) od_tensor_v(t)

static od_status check_info(od_tensor *info, const char *api, bool batched, od_error *err)
{
    if (info->device.type == OD_DEV_META || od_tensor_numel(info) == 0)
        return OD_OK;
    od_tensor *c = info;
    od_status st;
    if (info->device.type != OD_DEV_CPU) {
        od_device cpu = {OD_DEV_CPU, 0};
        if ((st = od_to_device(info, cpu, &c, err)))
            return st;
    } else if (!od_tensor_is_contiguous(info)) {
        if ((st = od_cx_clone(info, OD_MF_CONTIGUOUS, &c, err)))
            return st;
    } else {
        od_tensor_retain(c);
    }
    st = od_linalg_info_error(api, od_tensor_data(c), od_tensor_numel(c), batched, err);
    od_tensor_release(c);
    return st;
}

OD_CX_KERNEL(od_cia_linalg_wrap)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    od_tensor *A;
    od_status st;
    if ((st = od_cx_arg_tensor(op, s, 0, &A, err)))
        return st;
    od_value a[4];
    int n = 1, keep[2] = {0, -1}, info = -1;
    const char *api = NULL;
    od_opid callee;
    a[0] = T(A);
    switch (id) {
    case OD_OPID_linalg_inv:
        callee = OD_OPID_linalg_inv_ex, a[1] = od_bool(false), n = 2, info = 1, api = "linalg.inv";
        break;
    case OD_OPID_linalg_solve:
        callee = OD_OPID__linalg_solve_ex, a[1] = s->args[1], a[2] = s->args[2], a[3] = od_bool(false), n = 4;
        info = 3, api = "torch.linalg.solve";
        break;
    case OD_OPID_linalg_solve_ex:
        callee = OD_OPID__linalg_solve_ex, a[1] = s->args[1], a[2] = s->args[2], a[3] = s->args[3], n = 4;
        keep[1] = 3;
        break;
    case OD_OPID_linalg_cholesky:
        callee = OD_OPID_linalg_cholesky_ex, a[1] = s->args[1], a[2] = od_bool(false), n = 3, info = 1;
        api = "linalg.cholesky";
        break;
    case OD_OPID_linalg_svd:
        callee = OD_OPID__linalg_svd, a[1] = s->args[1], a[2] = od_bool(true), a[3] = s->args[2], n = 4;
        keep[0] = -2; /* all three */
        break;
    case OD_OPID_linalg_eigh:
        callee = OD_OPID__linalg_eigh, a[1] = s->args[1], a[2] = od_bool(true), n = 3, keep[1] = 1;
        break;
    case OD_OPID_linalg_det:
        callee = OD_OPID__linalg_det;
        break;
    case OD_OPID_linalg_slogdet:
        callee = OD_OPID__linalg_slogdet, keep[1] = 1;
        break;
    default: /* linalg_lu_factor */
        callee = OD_OPID_linalg_lu_factor_ex, a[1] = s->args[1], a[2] = od_bool(false), n = 3;
        keep[1] = 1, info = 2, api = "torch.linalg.lu_factor";
        break;
    }
    od_stack r;
    if ((st = od_call_builtin(callee, a, n, &r, err)))
        return st;
    if (info >= 0 && (st = check_info(r.rets[info].u.t, api, A->ndim > 2, err))) {
        od_stack_release_rets(&r);
        return st;
    }
    int nk = 0;
    if (keep[0] == -2) {
        for (int i = 0; i < 3; i++) {
            od_tensor_retain(r.rets[i].u.t);
            s->rets[nk++] = r.rets[i];
        }
    } else {
        for (int i = 0; i < 2 && keep[i] >= 0; i++) {
            od_tensor_retain(r.rets[keep[i]].u.t);
            s->rets[nk++] = r.rets[keep[i]];
        }
    }
    od_stack_release_rets(&r);
    s->nrets = nk;
    return OD_OK;
}
