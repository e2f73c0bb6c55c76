/* ew_cmp.cu — instantiates the comparison, where and clamp kernels. */
#include "ew_impl.cuh"

cudaError_t od_cu_ew_group_cmp(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    using namespace odcu;
    switch (a->op) {
    case OD_CU_EW_EQ: return ew_launch<OD_CU_EW_EQ>(it, a, st);
    case OD_CU_EW_NE: return ew_launch<OD_CU_EW_NE>(it, a, st);
    case OD_CU_EW_LT: return ew_launch<OD_CU_EW_LT>(it, a, st);
    case OD_CU_EW_LE: return ew_launch<OD_CU_EW_LE>(it, a, st);
    case OD_CU_EW_GT: return ew_launch<OD_CU_EW_GT>(it, a, st);
    case OD_CU_EW_GE: return ew_launch<OD_CU_EW_GE>(it, a, st);
    case OD_CU_EW_WHERE: return ew_launch<OD_CU_EW_WHERE>(it, a, st);
    case OD_CU_EW_CLAMP: return ew_launch<OD_CU_EW_CLAMP>(it, a, st);
    case OD_CU_EW_CLAMP_MIN: return ew_launch<OD_CU_EW_CLAMP_MIN>(it, a, st);
    case OD_CU_EW_CLAMP_MAX: return ew_launch<OD_CU_EW_CLAMP_MAX>(it, a, st);
    default: return cudaErrorNotSupported;
    }
}
