/* nocuda.c — od_cuda.h for builds without the CUDA backend (CUDA=0 or no
 * nvcc), so the server and tools call the same API either way.
 *
 * Invariants: compiled into the library only when the backend is off
 * (mk/cuda.mk adds it); with OD_HAVE_CUDA it is empty. Every query answers
 * "no device" and says why; nothing here allocates.
 */
#ifndef OD_HAVE_CUDA
#include <stdio.h>
#include <string.h>

#include "od_cuda.h"

static const char g_why[] = "CUDA unavailable: opdispatch was built without the CUDA backend (CUDA=0 or "
                            "nvcc not found)";

bool od_cuda_available(char *why, size_t cap)
{
    if (why && cap)
        snprintf(why, cap, "%s", g_why);
    return false;
}

int od_cuda_device_count(void) { return 0; }

od_status od_cuda_device_info(int ordinal, od_cuda_info *out)
{
    (void)ordinal;
    memset(out, 0, sizeof *out);
    return OD_EUNAVAIL;
}

od_status od_cuda_alloc_stats(int ordinal, od_cuda_alloc_info *out)
{
    (void)ordinal;
    memset(out, 0, sizeof *out);
    return OD_EUNAVAIL;
}

void od_cuda_empty_cache(void) {}
void od_cuda_set_poison(bool on) { (void)on; }
bool od_cuda_get_poison(void) { return false; }
void od_cuda_set_allow_tf32(bool on) { (void)on; }
bool od_cuda_get_allow_tf32(void) { return false; }
void od_cuda_manual_seed(uint64_t seed) { (void)seed; }

void od_cuda_rng_state(uint64_t *seed, uint64_t *offset)
{
    if (seed)
        *seed = 0;
    if (offset)
        *offset = 0;
}
#else
typedef int od_nocuda_unused_; /* the real backend is built: nothing here */
#endif
