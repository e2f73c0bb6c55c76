/* runtime.c — the CUDA backend's runtime: device probe, caching allocator,
 * per-thread streams / cuBLAS handles / pinned staging, error mapping, RNG.
 *
 * Invariants:
 *  - The CUDA runtime is first touched by probe() (pthread_once), called by
 *    every entry point here, never at registration or load time.
 *  - Allocator: one pool per device, guarded by its mutex. Each live block is
 *    in the pool's live map (pointer -> block size, requested size); each free
 *    block is in the pool's cache, sorted by (size, address). A request is
 *    rounded to a size class and served by a cached block of exactly that
 *    class when there is one, so a repeated request reuses memory without
 *    cudaMalloc; blocks go back to the driver only in empty_cache (explicit,
 *    or on out-of-memory before the one retry).
 *  - A block is only freed or reused after the operator that used it
 *    synchronized its stream (every CUDA operator is synchronous), so the
 *    cache needs no stream bookkeeping.
 *  - Per-thread state (streams, cuBLAS handles, staging, error word) is
 *    created lazily per device and destroyed by the thread-exit destructor.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* ---- probe ----------------------------------------------------------------------- */

static pthread_once_t g_probe_once = PTHREAD_ONCE_INIT;
static int g_count;
static char g_why[300];
static int g_sm_count[OD_CUDA_MAX_DEVICES];
static atomic_bool g_poison;
static atomic_bool g_allow_tf32;
static pthread_key_t g_tl_key;
static bool g_tl_key_ok;

typedef struct pool pool;
static void pools_init(void);
static void tl_destroy(void *p);

static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static void probe(void)
{
    atomic_store(&g_poison, env_flag("OD_CUDA_POISON"));
    atomic_store(&g_allow_tf32, env_flag("OD_CUDA_ALLOW_TF32"));
    pools_init();
    g_tl_key_ok = pthread_key_create(&g_tl_key, tl_destroy) == 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(g_why, sizeof g_why, "CUDA unavailable: %s (cudaGetDeviceCount: %s)",
                 cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        n = 0;
    } else if (n <= 0) {
        snprintf(g_why, sizeof g_why,
                 "CUDA unavailable: no CUDA-capable device is detected (cudaGetDeviceCount "
                 "returned 0)");
        n = 0;
    }
    if (n > OD_CUDA_MAX_DEVICES)
        n = OD_CUDA_MAX_DEVICES;
    for (int d = 0; d < n; d++) {
        int sm = 0;
        if (cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, d) != cudaSuccess || sm < 1)
            sm = 1;
        g_sm_count[d] = sm;
    }
    if (!g_tl_key_ok && n > 0) {
        snprintf(g_why, sizeof g_why, "CUDA unavailable: pthread_key_create failed");
        n = 0;
    }
    g_count = n;
}

static inline void ensure_probe(void) { pthread_once(&g_probe_once, probe); }

bool od_cuda_available(char *why, size_t cap)
{
    ensure_probe();
    if (g_count > 0)
        return true;
    if (why && cap)
        snprintf(why, cap, "%s", g_why);
    return false;
}

int od_cuda_device_count(void)
{
    ensure_probe();
    return g_count;
}

static od_status check_device(int device, od_error *err)
{
    ensure_probe();
    if (g_count == 0)
        return od_error_set(err, OD_EUNAVAIL, "%s", g_why);
    if (device < 0 || device >= g_count)
        return od_error_set(err, OD_EUNAVAIL,
                            "CUDA error: invalid device ordinal: cuda:%d is not available (%d CUDA "
                            "device%s)",
                            device, g_count, g_count == 1 ? "" : "s");
    return OD_OK;
}

/* ---- errors ------------------------------------------------------------------------- */

static bool sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
        return true;
    default:
        return false;
    }
}

od_status od_cu_status(cudaError_t e, const char *what, od_error *err)
{
    if (e == cudaSuccess)
        return OD_OK;
    (void)cudaGetLastError(); /* clear it, so the next call on this thread starts clean */
    od_status st;
    switch (e) {
    case cudaErrorMemoryAllocation: st = OD_EDEVMEM; break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorNoKernelImageForDevice:
        st = OD_EUNAVAIL;
        break;
    default: st = OD_EINTERNAL; break;
    }
    return od_error_set(err, st, "CUDA error: %s (%s in %s)%s", cudaGetErrorString(e),
                        cudaGetErrorName(e), what,
                        sticky(e) ? "; the device context is lost: restart the server to use this "
                                    "GPU again"
                                  : "");
}

od_status od_cu_blas_status(cublasStatus_t s, const char *what, od_error *err)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return OD_OK;
    (void)cudaGetLastError();
    od_status st;
    switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED: st = OD_EDEVMEM; break;
    case CUBLAS_STATUS_NOT_INITIALIZED: st = OD_EUNAVAIL; break;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: st = OD_EUNSUPPORTED; break;
    default: st = OD_EINTERNAL; break;
    }
    return od_error_set(err, st, "cuBLAS error: %s (%s in %s)", cublasGetStatusString(s),
                        cublasGetStatusName(s), what);
}

/* ---- per-thread state --------------------------------------------------------------- */

#define STAGE_CHUNK ((size_t)8 << 20)

typedef struct tl_dev {
    cudaStream_t stream;
    cublasHandle_t blas;
    void *stage[2];
    cudaEvent_t ev[2];
    int64_t *flag; /* mapped pinned, 2 words */
} tl_dev;

typedef struct tl_state {
    tl_dev dev[OD_CUDA_MAX_DEVICES];
} tl_state;

static _Thread_local tl_state *tl;
/* The device this thread last made current through set_device (-1: unknown),
 * so the per-call cudaSetDevice is skipped when nothing changed. */
static _Thread_local int tl_cur_dev = -1;

static cudaError_t set_device(int d)
{
    if (tl_cur_dev == d)
        return cudaSuccess;
    cudaError_t e = cudaSetDevice(d);
    tl_cur_dev = e == cudaSuccess ? d : -1;
    return e;
}

static void tl_destroy(void *p)
{
    tl_state *t = p;
    if (!t)
        return;
    for (int d = 0; d < OD_CUDA_MAX_DEVICES; d++) {
        tl_dev *x = &t->dev[d];
        if (!x->stream && !x->blas && !x->stage[0] && !x->flag)
            continue;
        if (set_device(d) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        if (x->blas)
            cublasDestroy(x->blas);
        for (int i = 0; i < 2; i++) {
            if (x->ev[i])
                cudaEventDestroy(x->ev[i]);
            if (x->stage[i])
                cudaFreeHost(x->stage[i]);
        }
        if (x->flag)
            cudaFreeHost(x->flag);
        if (x->stream)
            cudaStreamDestroy(x->stream);
        (void)cudaGetLastError();
    }
    free(t);
    if (tl == t)
        tl = NULL;
}

static od_status tl_get(tl_state **out, od_error *err)
{
    if (!tl) {
        tl_state *t = calloc(1, sizeof *t);
        if (!t)
            return od_error_set(err, OD_ENOMEM, "out of host memory for CUDA thread state");
        if (pthread_setspecific(g_tl_key, t) != 0) {
            free(t);
            return od_error_set(err, OD_ENOMEM, "pthread_setspecific failed for CUDA thread state");
        }
        tl = t;
    }
    *out = tl;
    return OD_OK;
}

od_status od_cu_begin(int device, od_cu_env *env, od_error *err)
{
    od_status st = check_device(device, err);
    if (st)
        return st;
    if ((st = od_cu_status(set_device(device), "cudaSetDevice", err)))
        return st;
    tl_state *t = NULL;
    if ((st = tl_get(&t, err)))
        return st;
    tl_dev *x = &t->dev[device];
    if (!x->stream &&
        (st = od_cu_status(cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking),
                           "cudaStreamCreateWithFlags", err))) {
        x->stream = NULL;
        return st;
    }
    env->device = device;
    env->stream = x->stream;
    env->sm_count = g_sm_count[device];
    return OD_OK;
}

od_status od_cu_finish(const od_cu_env *env, const char *what, od_error *err)
{
    return od_cu_status(cudaStreamSynchronize(env->stream), what, err);
}

od_status od_cu_blas_handle(const od_cu_env *env, cublasHandle_t *out, od_error *err)
{
    tl_state *t = NULL;
    od_status st = tl_get(&t, err);
    if (st)
        return st;
    tl_dev *x = &t->dev[env->device];
    if (!x->blas) {
        cublasHandle_t h;
        if ((st = od_cu_blas_status(cublasCreate(&h), "cublasCreate", err)))
            return st;
        if ((st = od_cu_blas_status(cublasSetStream(h, env->stream), "cublasSetStream", err))) {
            cublasDestroy(h);
            return st;
        }
        x->blas = h;
    }
    *out = x->blas;
    return OD_OK;
}

od_status od_cu_flag(const od_cu_env *env, int64_t **flag, od_error *err)
{
    tl_state *t = NULL;
    od_status st = tl_get(&t, err);
    if (st)
        return st;
    tl_dev *x = &t->dev[env->device];
    if (!x->flag) {
        void *p = NULL;
        if ((st = od_cu_status(cudaHostAlloc(&p, 2 * sizeof(int64_t),
                                             cudaHostAllocMapped | cudaHostAllocPortable),
                               "cudaHostAlloc (error word)", err)))
            return st;
        x->flag = p;
    }
    /* With unified addressing the host address is the device address. */
    x->flag[0] = 0;
    x->flag[1] = 0;
    *flag = x->flag;
    return OD_OK;
}

od_status od_cu_staging(const od_cu_env *env, void *bufs[2], cudaEvent_t evs[2], size_t *chunk,
                        od_error *err)
{
    tl_state *t = NULL;
    od_status st = tl_get(&t, err);
    if (st)
        return st;
    tl_dev *x = &t->dev[env->device];
    for (int i = 0; i < 2; i++) {
        if (!x->stage[i] &&
            (st = od_cu_status(cudaHostAlloc(&x->stage[i], STAGE_CHUNK, cudaHostAllocPortable),
                               "cudaHostAlloc (staging)", err))) {
            x->stage[i] = NULL;
            return st;
        }
        if (!x->ev[i] &&
            (st = od_cu_status(cudaEventCreateWithFlags(&x->ev[i], cudaEventDisableTiming),
                               "cudaEventCreate (staging)", err))) {
            x->ev[i] = NULL;
            return st;
        }
        bufs[i] = x->stage[i];
        evs[i] = x->ev[i];
    }
    *chunk = STAGE_CHUNK;
    return OD_OK;
}

/* ---- caching allocator --------------------------------------------------------------- */

typedef struct live_ent {
    void *ptr; /* NULL: empty slot */
    size_t size, req;
} live_ent;

typedef struct free_blk {
    size_t size;
    void *ptr;
} free_blk;

struct pool {
    pthread_mutex_t mu;
    free_blk *cache; /* sorted by (size, ptr) */
    size_t ncache, capcache;
    live_ent *live;  /* open addressing, linear probing, power-of-two capacity */
    size_t nlive, caplive;
    od_cuda_alloc_info st;
};

static pool g_pools[OD_CUDA_MAX_DEVICES];

static void pools_init(void)
{
    for (int d = 0; d < OD_CUDA_MAX_DEVICES; d++)
        pthread_mutex_init(&g_pools[d].mu, NULL);
}

#define SMALL_CLASS_MAX ((size_t)64 << 20)
#define LARGE_GRAIN ((size_t)2 << 20)

/* Size classes: 512 B minimum; up to 64 MiB four classes per power of two
 * (at most 25% slack); above, multiples of 2 MiB. Returns 0 on overflow. */
static size_t size_class(size_t n)
{
    if (n <= 512)
        return 512;
    if (n <= SMALL_CLASS_MAX) {
        int k = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^k < n <= 2^(k+1) */
        size_t step = (size_t)1 << (k - 2);                           /* 4 classes per power */
        return (n + step - 1) & ~(step - 1);
    }
    if (n > SIZE_MAX - LARGE_GRAIN)
        return 0;
    return (n + LARGE_GRAIN - 1) & ~(LARGE_GRAIN - 1);
}

static size_t live_hash(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 9;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 20) & (cap - 1);
}

static bool live_grow(pool *pl)
{
    size_t ncap = pl->caplive ? pl->caplive * 2 : 256;
    live_ent *n = calloc(ncap, sizeof *n);
    if (!n)
        return false;
    for (size_t i = 0; i < pl->caplive; i++) {
        if (!pl->live[i].ptr)
            continue;
        size_t j = live_hash(pl->live[i].ptr, ncap);
        while (n[j].ptr)
            j = (j + 1) & (ncap - 1);
        n[j] = pl->live[i];
    }
    free(pl->live);
    pl->live = n;
    pl->caplive = ncap;
    return true;
}

static bool live_put(pool *pl, void *p, size_t size, size_t req)
{
    if ((pl->nlive + 1) * 2 > pl->caplive && !live_grow(pl))
        return false;
    size_t j = live_hash(p, pl->caplive);
    while (pl->live[j].ptr)
        j = (j + 1) & (pl->caplive - 1);
    pl->live[j] = (live_ent){p, size, req};
    pl->nlive++;
    return true;
}

/* Removes p; returns false when p is not a live block of this pool. */
static bool live_take(pool *pl, void *p, live_ent *out)
{
    if (!pl->caplive)
        return false;
    size_t mask = pl->caplive - 1, j = live_hash(p, pl->caplive);
    while (pl->live[j].ptr && pl->live[j].ptr != p)
        j = (j + 1) & mask;
    if (!pl->live[j].ptr)
        return false;
    *out = pl->live[j];
    pl->live[j].ptr = NULL;
    pl->nlive--;
    /* Backward-shift deletion keeps every probe chain unbroken. */
    size_t hole = j;
    for (size_t k = (j + 1) & mask; pl->live[k].ptr; k = (k + 1) & mask) {
        size_t home = live_hash(pl->live[k].ptr, pl->caplive);
        bool movable = hole <= k ? (home <= hole || home > k) : (home <= hole && home > k);
        if (movable) {
            pl->live[hole] = pl->live[k];
            pl->live[k].ptr = NULL;
            hole = k;
        }
    }
    return true;
}

/* First cache index with size >= want (binary search). */
static size_t cache_lower(const pool *pl, size_t want)
{
    size_t lo = 0, hi = pl->ncache;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pl->cache[mid].size < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool cache_put(pool *pl, void *p, size_t size)
{
    if (pl->ncache == pl->capcache) {
        size_t ncap = pl->capcache ? pl->capcache * 2 : 64;
        free_blk *n = realloc(pl->cache, ncap * sizeof *n);
        if (!n)
            return false;
        pl->cache = n;
        pl->capcache = ncap;
    }
    size_t i = cache_lower(pl, size);
    while (i < pl->ncache && pl->cache[i].size == size && (uintptr_t)pl->cache[i].ptr < (uintptr_t)p)
        i++;
    memmove(&pl->cache[i + 1], &pl->cache[i], (pl->ncache - i) * sizeof *pl->cache);
    pl->cache[i] = (free_blk){size, p};
    pl->ncache++;
    pl->st.cached_bytes += size;
    return true;
}

/* Caller holds pl->mu and has made device current. */
static void pool_empty_locked(pool *pl)
{
    for (size_t i = 0; i < pl->ncache; i++) {
        cudaFree(pl->cache[i].ptr);
        pl->st.device_frees++;
    }
    (void)cudaGetLastError();
    pl->ncache = 0;
    pl->st.cached_bytes = 0;
}

static void fmt_bytes(char *buf, size_t cap, size_t b)
{
    if (b >= ((size_t)1 << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1u << 30));
    else if (b >= ((size_t)1 << 20))
        snprintf(buf, cap, "%.2f MiB", (double)b / (double)(1u << 20));
    else
        snprintf(buf, cap, "%zu bytes", b);
}

static od_status poison_block(int device, void *p, size_t n, od_error *err)
{
    od_cu_env env;
    od_status st = od_cu_begin(device, &env, err);
    if (st)
        return st;
    if ((st = od_cu_status(cudaMemsetAsync(p, 0xFF, n, env.stream), "cudaMemsetAsync (poison)", err)))
        return st;
    return od_cu_finish(&env, "poisoning a new block", err);
}

static void *cu_alloc(void *ctx, int device, size_t nbytes, od_error *err)
{
    (void)ctx;
    if (check_device(device, err))
        return NULL;
    size_t size = size_class(nbytes);
    if (!size) {
        od_error_set(err, OD_EDEVMEM, "CUDA out of memory. Tried to allocate %zu bytes", nbytes);
        return NULL;
    }
    pool *pl = &g_pools[device];
    void *p = NULL;
    bool hit = false;
    pthread_mutex_lock(&pl->mu);
    size_t i = cache_lower(pl, size);
    if (i < pl->ncache && pl->cache[i].size == size) {
        p = pl->cache[i].ptr;
        memmove(&pl->cache[i], &pl->cache[i + 1], (pl->ncache - i - 1) * sizeof *pl->cache);
        pl->ncache--;
        pl->st.cached_bytes -= size;
        hit = true;
    } else {
        cudaError_t e = set_device(device);
        if (e == cudaSuccess)
            e = cudaMalloc(&p, size);
        if (e == cudaErrorMemoryAllocation) {
            /* Give the cached blocks back and try once more. */
            (void)cudaGetLastError();
            pool_empty_locked(pl);
            pl->st.oom_retries++;
            e = cudaMalloc(&p, size);
        }
        if (e != cudaSuccess) {
            p = NULL;
            if (e == cudaErrorMemoryAllocation) {
                (void)cudaGetLastError();
                size_t fr = 0, tot = 0;
                if (cudaMemGetInfo(&fr, &tot) != cudaSuccess)
                    (void)cudaGetLastError();
                char a[32], b[32], c[32], f[32];
                fmt_bytes(a, sizeof a, nbytes);
                fmt_bytes(b, sizeof b, tot);
                fmt_bytes(c, sizeof c, pl->st.in_use_bytes);
                fmt_bytes(f, sizeof f, fr);
                pl->st.ooms++;
                od_error_set(err, OD_EDEVMEM,
                             "CUDA out of memory. Tried to allocate %s (GPU %d; %s total capacity; "
                             "%s already allocated by opdispatch; %s free; cache emptied and "
                             "retried)",
                             a, device, b, c, f);
            } else {
                od_cu_status(e, "cudaMalloc", err);
            }
        } else {
            pl->st.device_mallocs++;
        }
    }
    if (p && !live_put(pl, p, size, nbytes)) {
        /* No host memory to track the block: keep it cached rather than leak it. */
        if (!cache_put(pl, p, size)) {
            cudaFree(p);
            pl->st.device_frees++;
        }
        p = NULL;
        od_error_set(err, OD_ENOMEM, "out of host memory tracking a CUDA allocation");
    }
    if (p) {
        pl->st.allocs++;
        pl->st.cache_hits += hit;
        pl->st.in_use_bytes += size;
        pl->st.requested_bytes += nbytes;
        if (pl->st.in_use_bytes > pl->st.peak_in_use_bytes)
            pl->st.peak_in_use_bytes = pl->st.in_use_bytes;
    }
    pthread_mutex_unlock(&pl->mu);
    if (p && atomic_load_explicit(&g_poison, memory_order_relaxed) && poison_block(device, p, size, err)) {
        pthread_mutex_lock(&pl->mu);
        live_ent le;
        if (live_take(pl, p, &le)) {
            pl->st.in_use_bytes -= le.size;
            pl->st.requested_bytes -= le.req;
        }
        if (!cache_put(pl, p, size)) {
            cudaFree(p);
            pl->st.device_frees++;
        }
        pthread_mutex_unlock(&pl->mu);
        return NULL;
    }
    return p;
}

static void cu_free(void *ctx, int device, void *ptr, size_t nbytes)
{
    (void)ctx;
    (void)nbytes;
    if (!ptr || device < 0 || device >= OD_CUDA_MAX_DEVICES)
        return;
    pool *pl = &g_pools[device];
    pthread_mutex_lock(&pl->mu);
    live_ent le;
    if (!live_take(pl, ptr, &le)) {
        pthread_mutex_unlock(&pl->mu);
        fprintf(stderr, "opdispatch: CUDA free of %p on cuda:%d, which this allocator did not hand "
                        "out; ignored\n", ptr, device);
        return;
    }
    pl->st.in_use_bytes -= le.size;
    pl->st.requested_bytes -= le.req;
    if (!cache_put(pl, ptr, le.size)) {
        if (set_device(device) == cudaSuccess && cudaFree(ptr) == cudaSuccess)
            pl->st.device_frees++;
        (void)cudaGetLastError();
    }
    pthread_mutex_unlock(&pl->mu);
}

static const od_allocator g_allocator = {cu_alloc, cu_free, NULL};

const od_allocator *od_cu_allocator(void) { return &g_allocator; }

od_status od_cu_scratch(const od_cu_env *env, size_t nbytes, void **out, od_error *err)
{
    *out = NULL;
    if (!nbytes)
        return OD_OK;
    *out = cu_alloc(NULL, env->device, nbytes, err);
    if (!*out)
        return err ? err->status : OD_EDEVMEM;
    /* cu_alloc may have switched device (poison, OOM path): restore it. */
    return od_cu_status(set_device(env->device), "cudaSetDevice", err);
}

void od_cu_scratch_free(const od_cu_env *env, void *p, size_t nbytes)
{
    if (p)
        cu_free(NULL, env->device, p, nbytes);
}

od_status od_cuda_alloc_stats(int ordinal, od_cuda_alloc_info *out)
{
    ensure_probe();
    memset(out, 0, sizeof *out);
    if (ordinal < 0 || ordinal >= g_count)
        return OD_EUNAVAIL;
    pool *pl = &g_pools[ordinal];
    pthread_mutex_lock(&pl->mu);
    *out = pl->st;
    pthread_mutex_unlock(&pl->mu);
    return OD_OK;
}

void od_cuda_empty_cache(void)
{
    ensure_probe();
    for (int d = 0; d < g_count; d++) {
        pool *pl = &g_pools[d];
        pthread_mutex_lock(&pl->mu);
        if (pl->ncache && set_device(d) == cudaSuccess)
            pool_empty_locked(pl);
        (void)cudaGetLastError();
        pthread_mutex_unlock(&pl->mu);
    }
}

void od_cuda_set_poison(bool on)
{
    ensure_probe();
    atomic_store(&g_poison, on);
}

bool od_cuda_get_poison(void)
{
    ensure_probe();
    return atomic_load(&g_poison);
}

void od_cuda_set_allow_tf32(bool on)
{
    ensure_probe();
    atomic_store(&g_allow_tf32, on);
}

bool od_cuda_get_allow_tf32(void)
{
    ensure_probe();
    return atomic_load(&g_allow_tf32);
}

/* ---- device info ---------------------------------------------------------------------- */

/* Utilisation comes from NVML, which the driver installs (libnvidia-ml.so.1)
 * and which is not ours to link: it is opened at run time, once, and its
 * absence only leaves the figures unknown. NVML numbers devices its own way,
 * so the device is found by PCI bus id. */
typedef struct { unsigned int gpu, memory; } nvml_util;
static struct {
    pthread_once_t once;
    bool ok;
    int (*by_bus_id)(const char *, void **);
    int (*utilization)(void *, nvml_util *);
} g_nvml = {.once = PTHREAD_ONCE_INIT};

static void nvml_open(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    g_nvml.by_bus_id = (int (*)(const char *, void **))dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    g_nvml.utilization = (int (*)(void *, nvml_util *))dlsym(h, "nvmlDeviceGetUtilizationRates");
    g_nvml.ok = init && g_nvml.by_bus_id && g_nvml.utilization && init() == 0;
    if (!g_nvml.ok)
        dlclose(h);
}

static void nvml_utilization(int ordinal, int *gpu, int *mem)
{
    *gpu = *mem = -1;
    pthread_once(&g_nvml.once, nvml_open);
    char bus[32];
    void *dev = NULL;
    nvml_util u;
    if (!g_nvml.ok || cudaDeviceGetPCIBusId(bus, (int)sizeof bus, ordinal) != cudaSuccess ||
        g_nvml.by_bus_id(bus, &dev) != 0 || g_nvml.utilization(dev, &u) != 0)
        return;
    *gpu = (int)u.gpu;
    *mem = (int)u.memory;
}

od_status od_cuda_device_info(int ordinal, od_cuda_info *out)
{
    memset(out, 0, sizeof *out);
    if (check_device(ordinal, NULL))
        return OD_EUNAVAIL;
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) {
        (void)cudaGetLastError();
        return OD_EINTERNAL;
    }
    out->ordinal = ordinal;
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sm_count = p.multiProcessorCount;
    out->total_mem_bytes = p.totalGlobalMem;
    out->l2_bytes = p.l2CacheSize > 0 ? (size_t)p.l2CacheSize : 0;
    out->smem_per_block_optin = p.sharedMemPerBlockOptin;
    out->mem_bus_bits = p.memoryBusWidth;
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, ordinal) == cudaSuccess)
        out->clock_khz = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, ordinal) == cudaSuccess)
        out->mem_clock_khz = v;
    if (cudaDriverGetVersion(&v) == cudaSuccess)
        out->driver_version = v;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess)
        out->runtime_version = v;
    nvml_utilization(ordinal, &out->util_gpu_pct, &out->util_mem_pct);
    /* Free memory needs a context on the device; the caller asked for it. */
    int prev = tl_cur_dev;
    if (set_device(ordinal) == cudaSuccess) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess)
            out->free_mem_bytes = fr;
        if (prev >= 0)
            set_device(prev);
    }
    (void)cudaGetLastError();
    return OD_OK;
}

/* ---- generator ------------------------------------------------------------------------- */

static pthread_mutex_t g_rng_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_rng_seed = 67280421310721ull;
static uint64_t g_rng_offset;

void od_cuda_manual_seed(uint64_t seed)
{
    pthread_mutex_lock(&g_rng_mu);
    g_rng_seed = seed;
    g_rng_offset = 0;
    pthread_mutex_unlock(&g_rng_mu);
}

void od_cuda_rng_state(uint64_t *seed, uint64_t *offset)
{
    pthread_mutex_lock(&g_rng_mu);
    if (seed)
        *seed = g_rng_seed;
    if (offset)
        *offset = g_rng_offset;
    pthread_mutex_unlock(&g_rng_mu);
}

void od_cu_rng_next(uint64_t n, uint64_t *seed, uint64_t *offset)
{
    pthread_mutex_lock(&g_rng_mu);
    *seed = g_rng_seed;
    *offset = g_rng_offset;
    g_rng_offset += n;
    pthread_mutex_unlock(&g_rng_mu);
}
