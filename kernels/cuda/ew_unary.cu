/* ew_unary.cu — instantiates the hand-routed unary kernels (neg abs relu gelu). */
#include "ew_impl.cuh"

cudaError_t od_cu_ew_group_unary(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    using namespace odcu;
    switch (a->op) {
    case OD_CU_EW_NEG: return ew_launch<OD_CU_EW_NEG>(it, a, st);
    case OD_CU_EW_ABS: return ew_launch<OD_CU_EW_ABS>(it, a, st);
    case OD_CU_EW_RELU: return ew_launch<OD_CU_EW_RELU>(it, a, st);
    case OD_CU_EW_GELU: return ew_launch<OD_CU_EW_GELU>(it, a, st);
    case OD_CU_EW_GELU_TANH: return ew_launch<OD_CU_EW_GELU_TANH>(it, a, st);
    default: return cudaErrorNotSupported;
    }
}
