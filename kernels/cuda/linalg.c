/* linalg.c — CUDA kernels of the LAPACK operators (linalg_inv_ex,
 * _linalg_solve_ex, linalg_cholesky_ex, linalg_qr, _linalg_svd,
 * _linalg_eigh, _linalg_det, _linalg_slogdet, linalg_lu_factor_ex,
 * linalg_solve_triangular, linalg_lstsq).
 *
 * Invariants: the shape function and od_linalg_check_dtype validate first,
 * on the device's tensors, so CUDA refuses what the CPU backend refuses with
 * the same messages. The factorizations themselves are staged through the
 * host: the tensor arguments are copied to the CPU, the same operator runs
 * there through the dispatcher (OpenBLAS LAPACK, kernels/cpu/linalg.c), and
 * each return is copied back to the call's device. That is what torch does
 * for small matrices under MAGMA; a cuSOLVER path is future work, so CUDA
 * answers equal the CPU's exactly (and linalg_lu_factor_ex(pivot=False), which
 * cuSOLVER would allow, is refused as on the CPU). linalg_lstsq is parsed
 * with CUDA's rules (gels only, the default) and runs gels on the host.
 */
#include "cuda_internal.h"
#include "od_autograd.h"
#include "od_shape.h"

od_status od_cuda_linalg(void *ctx, const od_op *op, od_keyset ks, od_stack *s, od_error *err)
{
    (void)ks;
    od_opid id = OD_OPID_OF_CTX(ctx);
    int device;
    od_out_spec spec[4];
    int nouts = 0;
    od_status st;
    if ((st = od_cu_call_device(op, s, false, &device, err)))
        return st;
    if (id == OD_OPID_linalg_lstsq) {
        od_linalg_info li;
        if ((st = od_linalg_parse(id, s, &li, err)))
            return st;
    } else if ((st = od_shape_linalg(id, s, spec, &nouts, err)) || (st = od_linalg_check_dtype(id, s, err))) {
        return st;
    }
    od_value args[8];
    int n = s->nargs < 8 ? s->nargs : 8;
    for (int i = 0; i < n; i++)
        args[i] = s->args[i];
    /* _linalg_svd's driver= is cuSOLVER's choice, which the host refuses */
    if (id == OD_OPID__linalg_svd && n > 3)
        args[3] = od_none();
    /* linalg_lstsq on CUDA is gels, whatever the host's default */
    if (id == OD_OPID_linalg_lstsq) {
        for (; n < 4; n++)
            args[n] = od_none();
        args[3] = od_str("gels");
    }
    return od_cu_on_host(id, args, n, device, s, err);
}
