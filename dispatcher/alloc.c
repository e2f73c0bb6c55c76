/* alloc.c — the CPU allocator: 64-byte aligned blocks and a cache of large ones.
 *
 * Invariants:
 *  - Blocks below OD_CPU_CACHE_MIN_BLOCK (and absurdly large ones) come
 *    straight from posix_memalign and go straight back to free(): no lock.
 *  - A large request is rounded up to its size class (4 classes per power of
 *    two) and allocated at that size, so the free path can recompute the
 *    class from the nbytes the caller passes back; a freed large block is
 *    kept, keyed by class, instead of being returned. Why: glibc mmaps blocks
 *    this large and munmaps them on free, so every fresh output would pay
 *    the page faults of touching new memory again.
 *  - A cached block holds its own list node in its first bytes (it is ours
 *    and unused), so caching never allocates.
 *  - cached_bytes <= cache_limit at every unlock; the least recently cached
 *    blocks are evicted first. System frees happen outside the lock.
 *  - in_use counts the requested bytes of live blocks of every size.
 *  - Every block handed out reads as zeros (od_cpu_alloc_uninit and
 *    od_cpu_alloc_overwrite excepted, for callers that write every byte):
 *    no byte one request wrote is readable by the next user of the memory.
 *    Fresh large blocks are mmapped (the kernel zeroes them), a reused one
 *    is cleared on the way out, small ones come from calloc-like clearing.
 *    A reused block of 4 MiB or more is cleared across the worker pool
 *    (od_parallel_for: serial when the pool is busy or the caller is in a
 *    region, and finished serially when a deadline cuts it short).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "od_parallel.h"
#include "od_tensor.h"

#define ALIGN 64
#define HUGE_PAGE ((size_t)2 << 20)
#define MIN_CLASS_LOG2 18 /* 256 KiB == OD_CPU_CACHE_MIN_BLOCK */
#define MAX_CLASS_LOG2 46 /* larger requests are not cached (and will rarely succeed) */
#define NUM_CLASSES ((MAX_CLASS_LOG2 - MIN_CLASS_LOG2 + 1) * 4 + 1)

_Static_assert(((size_t)1 << MIN_CLASS_LOG2) == OD_CPU_CACHE_MIN_BLOCK, "class table base");

typedef struct block {
    struct block *cls_prev, *cls_next; /* blocks of the same class */
    struct block *lru_prev, *lru_next; /* all cached blocks, newest first */
    size_t bytes;                      /* the class size */
    int cls;
} block;

static struct {
    pthread_mutex_t lock;
    block *cls_head[NUM_CLASSES];
    block *lru_head, *lru_tail;
    size_t cached_bytes;
    size_t limit;
    uint64_t hits, misses, evictions;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .limit = OD_CPU_CACHE_DEFAULT_LIMIT};

static atomic_size_t in_use_bytes;

/* Size class of a large request: index and rounded size. false when the
 * request is outside the cached range. */
static bool size_class(size_t n, int *cls, size_t *bytes)
{
    if (n < OD_CPU_CACHE_MIN_BLOCK || n > ((size_t)1 << MAX_CLASS_LOG2))
        return false;
    int k = 63 - __builtin_clzll((unsigned long long)n); /* 2^k <= n < 2^(k+1) */
    size_t step = (size_t)1 << (k - 2);
    size_t q = (n + step - 1) / step; /* 4..8 */
    if (q == 8) {
        k++;
        q = 4;
    }
    *cls = (k - MIN_CLASS_LOG2) * 4 + (int)(q - 4);
    *bytes = q << (k - 2);
    return true;
}

static void lru_unlink(block *b)
{
    if (b->lru_prev)
        b->lru_prev->lru_next = b->lru_next;
    else
        cache.lru_head = b->lru_next;
    if (b->lru_next)
        b->lru_next->lru_prev = b->lru_prev;
    else
        cache.lru_tail = b->lru_prev;
}

static void cls_unlink(block *b)
{
    if (b->cls_prev)
        b->cls_prev->cls_next = b->cls_next;
    else
        cache.cls_head[b->cls] = b->cls_next;
    if (b->cls_next)
        b->cls_next->cls_prev = b->cls_prev;
}

/* Caller holds the lock. Unlinks the oldest blocks until cached_bytes <= cap
 * and returns them chained through lru_next, to be freed after unlocking. */
static block *evict_to(size_t cap)
{
    block *out = NULL;
    while (cache.cached_bytes > cap && cache.lru_tail) {
        block *b = cache.lru_tail;
        lru_unlink(b);
        cls_unlink(b);
        cache.cached_bytes -= b->bytes;
        cache.evictions++;
        b->lru_next = out;
        out = b;
    }
    return out;
}

/* Large blocks are mapped and unmapped directly: a fresh mapping is zero
 * without a memset, and no heap arena ever recycles their bytes. */
#if defined(__SANITIZE_ADDRESS__)
/* AddressSanitizer cannot see overflows of mmapped memory: under it, large
 * blocks come from its heap and are cleared by hand. */
static void system_free(void *p, size_t bytes)
{
    (void)bytes;
    free(p);
}
static void *system_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, bytes) != 0)
        return NULL;
    return p;
}
#define FRESH_IS_ZERO 0
#else
#define FRESH_IS_ZERO 1
static void system_free(void *p, size_t bytes) { munmap(p, bytes); }

static void *system_alloc(size_t bytes)
{
    /* Large blocks are aligned to a huge page and advised as such: first
     * touch then faults 2 MiB at a time where transparent huge pages allow.
     * Over-map by one huge page and trim both ends to get the alignment. */
    size_t extra = bytes >= HUGE_PAGE ? HUGE_PAGE : 0;
    char *m = mmap(NULL, bytes + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *p = m;
    if (extra) {
        p = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
        if (p > m)
            munmap(m, (size_t)(p - m));
        size_t tail = (size_t)(m + bytes + extra - (p + bytes));
        if (tail)
            munmap(p + bytes, tail);
#ifdef MADV_HUGEPAGE
        (void)madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    }
    return p;
}
#endif

static void free_chain(block *b)
{
    while (b) {
        block *next = b->lru_next;
        system_free(b, b->bytes);
        b = next;
    }
}

/* Poison mode: overwrite-promised blocks are filled with 0xA5 (see
 * od_tensor_empty_uninit). Read once from OD_CPU_POISON, then settable. */
static atomic_int g_poison = -1;

bool od_cpu_get_poison(void)
{
    int p = atomic_load_explicit(&g_poison, memory_order_relaxed);
    if (p < 0) {
        const char *e = getenv("OD_CPU_POISON");
        p = e && *e && strcmp(e, "0") != 0;
        atomic_store(&g_poison, p);
    }
    return p;
}

void od_cpu_set_poison(bool on) { atomic_store(&g_poison, on ? 1 : 0); }

/* Clearing a large block is split across the worker pool (one thread's
 * memset of a 32 MB output was most of nll_loss_backward's time). A loop
 * cut short (a deadline) is finished here: every byte is cleared. */
#define ZERO_CHUNK ((size_t)1 << 20)

typedef struct zero_job {
    char *p;
    size_t n;
} zero_job;

static void zero_chunks(void *ctx, int64_t b, int64_t e)
{
    const zero_job *z = ctx;
    size_t lo = (size_t)b * ZERO_CHUNK, hi = (size_t)e * ZERO_CHUNK < z->n ? (size_t)e * ZERO_CHUNK : z->n;
    memset(z->p + lo, 0, hi - lo);
}

static void zero_block(void *p, size_t n)
{
    zero_job z = {p, n};
    if (n < 4 * ZERO_CHUNK || od_parallel_for((int64_t)((n + ZERO_CHUNK - 1) / ZERO_CHUNK), 1, zero_chunks, &z) != OD_OK)
        memset(p, 0, n);
}

static void *cpu_alloc_impl(size_t nbytes, bool zero, od_error *err)
{
    int cls;
    size_t bytes;
    void *p = NULL;
    if (nbytes == 0)
        nbytes = 1; /* a unique pointer, like malloc(0) but never NULL */
    if (!size_class(nbytes, &cls, &bytes)) {
        if (posix_memalign(&p, ALIGN, nbytes) != 0)
            p = NULL;
        else if (zero)
            memset(p, 0, nbytes); /* the heap recycles other requests' bytes */
    } else {
        pthread_mutex_lock(&cache.lock);
        block *b = cache.cls_head[cls];
        if (b) {
            cls_unlink(b);
            lru_unlink(b);
            cache.cached_bytes -= b->bytes;
            cache.hits++;
        } else {
            cache.misses++;
        }
        pthread_mutex_unlock(&cache.lock);
        p = b;
        bool dirty = p != NULL; /* the last user's bytes; beyond nbytes nobody reads */
        if (!p) {
            p = system_alloc(bytes);
            if (!p) { /* memory is short: give the cache back and try once more */
                od_cpu_cache_empty();
                p = system_alloc(bytes);
            }
            dirty = !FRESH_IS_ZERO;
        }
        if (p && zero && dirty)
            zero_block(p, nbytes);
    }
    if (!p) {
        od_error_set(err, OD_ENOMEM, "out of memory: failed to allocate %zu bytes on cpu", nbytes);
        return NULL;
    }
    atomic_fetch_add_explicit(&in_use_bytes, nbytes, memory_order_relaxed);
    return p;
}

static void *cpu_alloc(void *ctx, int device_index, size_t nbytes, od_error *err)
{
    (void)ctx;
    (void)device_index;
    return cpu_alloc_impl(nbytes, true, err);
}

static void cpu_free(void *ctx, int device_index, void *ptr, size_t nbytes)
{
    (void)ctx;
    (void)device_index;
    if (!ptr)
        return;
    if (nbytes == 0)
        nbytes = 1;
    atomic_fetch_sub_explicit(&in_use_bytes, nbytes, memory_order_relaxed);
    int cls;
    size_t bytes;
    if (!size_class(nbytes, &cls, &bytes)) {
        free(ptr);
        return;
    }
    pthread_mutex_lock(&cache.lock);
    if (bytes > cache.limit) {
        pthread_mutex_unlock(&cache.lock);
        system_free(ptr, bytes);
        return;
    }
    block *b = ptr;
    b->bytes = bytes;
    b->cls = cls;
    b->cls_prev = NULL;
    b->cls_next = cache.cls_head[cls];
    if (b->cls_next)
        b->cls_next->cls_prev = b;
    cache.cls_head[cls] = b;
    b->lru_prev = NULL;
    b->lru_next = cache.lru_head;
    if (b->lru_next)
        b->lru_next->lru_prev = b;
    else
        cache.lru_tail = b;
    cache.lru_head = b;
    cache.cached_bytes += bytes;
    block *evicted = evict_to(cache.limit);
    pthread_mutex_unlock(&cache.lock);
    free_chain(evicted);
}

void *od_cpu_alloc_uninit(size_t nbytes, od_error *err) { return cpu_alloc_impl(nbytes, false, err); }

void *od_cpu_alloc_overwrite(size_t nbytes, od_error *err)
{
    void *p = cpu_alloc_impl(nbytes, false, err);
    if (p && od_cpu_get_poison())
        memset(p, 0xA5, nbytes);
    return p;
}

void od_cpu_free(void *ptr, size_t nbytes) { cpu_free(NULL, 0, ptr, nbytes); }

static const od_allocator cpu_allocator = {cpu_alloc, cpu_free, NULL};

const od_allocator *od_cpu_allocator(void) { return &cpu_allocator; }

void od_cpu_alloc_stats(od_cpu_alloc_info *out)
{
    pthread_mutex_lock(&cache.lock);
    out->cached_bytes = cache.cached_bytes;
    out->cache_limit = cache.limit;
    out->hits = cache.hits;
    out->misses = cache.misses;
    out->evictions = cache.evictions;
    pthread_mutex_unlock(&cache.lock);
    out->in_use_bytes = atomic_load_explicit(&in_use_bytes, memory_order_relaxed);
}

void od_cpu_cache_set_limit(size_t max_bytes)
{
    pthread_mutex_lock(&cache.lock);
    cache.limit = max_bytes;
    block *evicted = evict_to(max_bytes);
    pthread_mutex_unlock(&cache.lock);
    free_chain(evicted);
}

void od_cpu_cache_empty(void)
{
    pthread_mutex_lock(&cache.lock);
    block *evicted = evict_to(0);
    pthread_mutex_unlock(&cache.lock);
    free_chain(evicted);
}

/* Return cached memory at exit so leak checkers and memory tools see a clean
 * heap (cached blocks are reachable, but nobody will reuse them now). */
__attribute__((destructor)) static void cpu_cache_at_exit(void) { od_cpu_cache_empty(); }
