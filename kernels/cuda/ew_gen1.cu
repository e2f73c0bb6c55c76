/* ew_gen1.cu — kernels of the OD_EW1 (one-input) operators of ops.def. */
#define OD_EW_GEN_ARITY 1
#include "ew_gen.cuh"
