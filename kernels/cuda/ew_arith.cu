/* ew_arith.cu — instantiates the arithmetic elementwise kernels (copy, add,
 * sub, mul, div and its rounding modes, pow, maximum, minimum). */
#include "ew_impl.cuh"

cudaError_t od_cu_ew_group_arith(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    using namespace odcu;
    switch (a->op) {
    case OD_CU_EW_COPY: return ew_launch<OD_CU_EW_COPY>(it, a, st);
    case OD_CU_EW_ADD: return ew_launch<OD_CU_EW_ADD>(it, a, st);
    case OD_CU_EW_SUB: return ew_launch<OD_CU_EW_SUB>(it, a, st);
    case OD_CU_EW_MUL: return ew_launch<OD_CU_EW_MUL>(it, a, st);
    case OD_CU_EW_DIV: return ew_launch<OD_CU_EW_DIV>(it, a, st);
    case OD_CU_EW_DIV_TRUNC: return ew_launch<OD_CU_EW_DIV_TRUNC>(it, a, st);
    case OD_CU_EW_DIV_FLOOR: return ew_launch<OD_CU_EW_DIV_FLOOR>(it, a, st);
    case OD_CU_EW_POW: return ew_launch<OD_CU_EW_POW>(it, a, st);
    case OD_CU_EW_MAXIMUM: return ew_launch<OD_CU_EW_MAXIMUM>(it, a, st);
    case OD_CU_EW_MINIMUM: return ew_launch<OD_CU_EW_MINIMUM>(it, a, st);
    default: return cudaErrorNotSupported;
    }
}
