/* od_cuda.h — the CUDA backend's public face: devices, memory, knobs.
 *
 * Plain C with no CUDA types, so the server and tools include it without the
 * CUDA toolkit. Every function here is safe to call on a machine with no GPU
 * or no driver: queries answer "none" (0 devices, OD_EUNAVAIL) and say why.
 *
 * Invariants of the backend behind it:
 *  - The CUDA runtime is touched lazily, on the first query or device call,
 *    never at registration: od_register_cuda_kernels() registers every CUDA
 *    kernel on any machine (the dispatch tables show them), and a process
 *    that forks before its first device call (Criterion) stays usable.
 *  - Every CUDA operator returns only after its device work has finished
 *    (it synchronizes its stream), so a result tensor may be used, read or
 *    freed from any thread, and a device fault is reported by the call that
 *    caused it.
 *  - Device memory comes from a caching allocator: a freed block goes back to
 *    a per-device cache and is reused by a later request of a fitting size,
 *    so a repeated call does not cudaMalloc/cudaFree. Out of memory empties
 *    the device's cache and retries once before failing with OD_EDEVMEM.
 *  - Each thread gets its own stream and cuBLAS handle per device, created on
 *    first use and destroyed when the thread exits.
 */
#ifndef OD_CUDA_H
#define OD_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "od_error.h"

#define OD_CUDA_MAX_DEVICES 16

/* True when at least one CUDA device is usable. Otherwise writes the reason
 * into why (caller's buffer of cap bytes; may be NULL), e.g. "CUDA
 * unavailable: no CUDA-capable device is detected (cudaGetDeviceCount:
 * cudaErrorNoDevice)". The answer is computed once per process. */
bool od_cuda_available(char *why, size_t cap);

/* Number of usable devices (0 without a device or driver; at most
 * OD_CUDA_MAX_DEVICES). */
int od_cuda_device_count(void);

typedef struct od_cuda_info {
    int ordinal;
    char name[256];             /* "NVIDIA H100 80GB HBM3" */
    int cc_major, cc_minor;     /* compute capability, 9.0 for Hopper */
    int sm_count;               /* streaming multiprocessors */
    size_t total_mem_bytes;     /* device memory */
    size_t free_mem_bytes;      /* free now, as the driver sees it */
    size_t l2_bytes;            /* L2 cache size */
    size_t smem_per_block_optin;/* largest shared memory a block may opt in to */
    int clock_khz;              /* SM clock (0 when the runtime does not say) */
    int mem_clock_khz;          /* memory clock (0 when unknown) */
    int mem_bus_bits;           /* memory bus width (0 when unknown) */
    int driver_version;         /* e.g. 13000 */
    int runtime_version;
    int util_gpu_pct;           /* NVML's utilisation over the last sample period; -1 unknown */
    int util_mem_pct;           /* ... of the memory bus; -1 unknown */
} od_cuda_info;

/* Fills *out (caller's) for device ordinal. OD_EUNAVAIL without a device or
 * for an ordinal out of range; OD_EINTERNAL if the runtime fails. */
od_status od_cuda_device_info(int ordinal, od_cuda_info *out);

typedef struct od_cuda_alloc_info {
    size_t in_use_bytes;      /* bytes of blocks held by live tensors (block sizes) */
    size_t requested_bytes;   /* bytes the live allocations asked for */
    size_t cached_bytes;      /* bytes of free blocks kept for reuse */
    size_t peak_in_use_bytes; /* high-water mark of in_use_bytes */
    uint64_t allocs;          /* allocation requests served */
    uint64_t cache_hits;      /* ... of which came from the cache */
    uint64_t device_mallocs;  /* cudaMalloc calls that succeeded */
    uint64_t device_frees;    /* cudaFree calls (cache emptied) */
    uint64_t oom_retries;     /* times an OOM emptied the cache and retried */
    uint64_t ooms;            /* requests that failed with OD_EDEVMEM */
} od_cuda_alloc_info;

/* Allocator counters of device ordinal into *out (caller's). OD_EUNAVAIL
 * for an ordinal out of range (the counters of an unused device are zero). */
od_status od_cuda_alloc_stats(int ordinal, od_cuda_alloc_info *out);

/* Returns every cached (free) block of every device to the driver. Blocks in
 * use are untouched. No-op without a device. */
void od_cuda_empty_cache(void);

/* Debug mode: every block the allocator hands out is first filled with 0xFF
 * bytes (NaN in every floating dtype, -1 in integers), so an output element
 * a kernel forgets to write shows up. Off by default; OD_CUDA_POISON=1 in the
 * environment turns it on at start. Process-wide. */
void od_cuda_set_poison(bool on);
bool od_cuda_get_poison(void);

/* float32 matrix products on tensor cores (TF32, ~1e-3 relative error), like
 * torch.backends.cuda.matmul.allow_tf32. Off by default; OD_CUDA_ALLOW_TF32=1
 * in the environment turns it on at start. Process-wide. */
void od_cuda_set_allow_tf32(bool on);
bool od_cuda_get_allow_tf32(void);

/* The CUDA generator (rand, randn): Philox4x32-10 keyed by seed; each call
 * consumes a range of the counter ("offset"), so calls never repeat numbers
 * and a given (seed, offset) reproduces the same tensor on any device.
 * Default seed 67280421310721 (PyTorch's). Setting the seed resets the offset
 * to 0. Process-wide, thread-safe. */
void od_cuda_manual_seed(uint64_t seed);
/* Current seed and offset (either pointer may be NULL; caller's storage). */
void od_cuda_rng_state(uint64_t *seed, uint64_t *offset);

#endif
