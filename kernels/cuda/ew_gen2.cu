/* ew_gen2.cu — kernels of the OD_EW2 (two-input) operators of ops.def. */
#define OD_EW_GEN_ARITY 2
#include "ew_gen.cuh"
