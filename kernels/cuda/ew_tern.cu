/* ew_tern.cu — instantiates the lerp, addcmul, addcdiv and nextafter kernels. */
#include "ew_impl.cuh"

cudaError_t od_cu_ew_group_tern(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    using namespace odcu;
    switch (a->op) {
    case OD_CU_EW_LERP: return ew_launch<OD_CU_EW_LERP>(it, a, st);
    case OD_CU_EW_LERP_S: return ew_launch<OD_CU_EW_LERP_S>(it, a, st);
    case OD_CU_EW_ADDCMUL: return ew_launch<OD_CU_EW_ADDCMUL>(it, a, st);
    case OD_CU_EW_ADDCDIV: return ew_launch<OD_CU_EW_ADDCDIV>(it, a, st);
    case OD_CU_EW_NEXTAFTER: return ew_launch<OD_CU_EW_NEXTAFTER>(it, a, st);
    default: return cudaErrorNotSupported;
    }
}
