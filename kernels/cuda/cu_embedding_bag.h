/* cu_embedding_bag.h — interface between the boxed CUDA embedding_bag
 * forward (embedding_bag.c, gcc) and its launcher (embedding_bag.cu, nvcc).
 *
 * Invariants: plain C, OD_CU_* dtypes, borrowed device pointers, the
 * launcher only enqueues. Inputs are read through their element strides;
 * the four outputs are new, contiguous, in od_embag_plan's shapes
 * (shape_embedding_bag.c). Data errors (offsets[0] != 0, offsets[-1] > n,
 * decreasing offsets, an index outside [0, V)) are reported through flag:
 * flag[0] = OD_CU_EMBAG_E*, flag[1] = the offending value.
 */
#ifndef OD_CU_EMBEDDING_BAG_H
#define OD_CU_EMBEDDING_BAG_H

#include "cuda_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { OD_CU_EMBAG_EINDEX = 1, OD_CU_EMBAG_EFIRST = 2, OD_CU_EMBAG_ELAST = 3, OD_CU_EMBAG_EORDER = 4 };

typedef struct od_cu_embag_args {
    int32_t mode, wdt, idx_dt, off_dt, out_idt, sm_count, has_psw;
    int64_t n, nbags, no, V, D, padding_idx;
    const void *w;        /* weight [V, D] */
    int64_t ws0, ws1;
    const void *idx;      /* [n] */
    int64_t is0;
    const void *off;      /* [no] */
    int64_t os0;
    const void *psw;      /* [n], weight's dtype, or NULL */
    int64_t ps0;
    void *out, *o2b, *bsz, *maxi; /* outputs 0-3 */
    int64_t *flag;
} od_cu_embag_args;

cudaError_t od_cu_embedding_bag(const od_cu_embag_args *a, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
