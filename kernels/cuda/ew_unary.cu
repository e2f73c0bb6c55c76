/* ew_unary.cu — instantiates the unary kernels (neg ... silu). */
#include "ew_impl.cuh"

cudaError_t od_cu_ew_group_unary(const od_cu_iter *it, const od_cu_ew_args *a, cudaStream_t st)
{
    using namespace odcu;
    switch (a->op) {
    case OD_CU_EW_NEG: return ew_launch<OD_CU_EW_NEG>(it, a, st);
    case OD_CU_EW_ABS: return ew_launch<OD_CU_EW_ABS>(it, a, st);
    case OD_CU_EW_RELU: return ew_launch<OD_CU_EW_RELU>(it, a, st);
    case OD_CU_EW_EXP: return ew_launch<OD_CU_EW_EXP>(it, a, st);
    case OD_CU_EW_LOG: return ew_launch<OD_CU_EW_LOG>(it, a, st);
    case OD_CU_EW_SQRT: return ew_launch<OD_CU_EW_SQRT>(it, a, st);
    case OD_CU_EW_RSQRT: return ew_launch<OD_CU_EW_RSQRT>(it, a, st);
    case OD_CU_EW_SIN: return ew_launch<OD_CU_EW_SIN>(it, a, st);
    case OD_CU_EW_COS: return ew_launch<OD_CU_EW_COS>(it, a, st);
    case OD_CU_EW_TANH: return ew_launch<OD_CU_EW_TANH>(it, a, st);
    case OD_CU_EW_SIGMOID: return ew_launch<OD_CU_EW_SIGMOID>(it, a, st);
    case OD_CU_EW_GELU: return ew_launch<OD_CU_EW_GELU>(it, a, st);
    case OD_CU_EW_GELU_TANH: return ew_launch<OD_CU_EW_GELU_TANH>(it, a, st);
    case OD_CU_EW_SILU: return ew_launch<OD_CU_EW_SILU>(it, a, st);
    default: return cudaErrorNotSupported;
    }
}
